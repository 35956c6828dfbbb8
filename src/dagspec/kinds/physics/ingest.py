"""The numpy/Arrow core of ``hep_event_features``: ROOT branches -> the seed schema, as CERN does.

Per Arrow batch, every collection (muons, electrons, photons, jets) becomes flat numpy arrays plus
an event index; the selection (at least one isolated lepton), the particle list (the leading
isolated lepton first) and the 14 high-level features are computed for all events of the batch at
once. Features the input does not have are 0 (docs/physics.md lists what each input provides).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dagspec.errors import StageFailedError
from dagspec.kinds.physics.arrow import flat_values, list_offsets, to_list, to_nested_list
from dagspec.kinds.physics.hep_event_params import CollectionBranches, HepEventFeaturesParams

_EVENT_ID = "__event_id"
MUON, ELECTRON, PHOTON, JET = "muons", "electrons", "photons", "jets"


@dataclass
class Objects:
    """One collection of one batch, flat: event index + kinematics + extras (n objects each)."""

    event: np.ndarray
    position: np.ndarray
    px: np.ndarray
    py: np.ndarray
    pz: np.ndarray
    e: np.ndarray
    pt: np.ndarray
    eta: np.ndarray
    phi: np.ndarray
    charge: np.ndarray
    iso: np.ndarray  # (n, 3) relative: charged, photon, neutral
    btag: np.ndarray

    def take(self, mask: np.ndarray) -> Objects:
        """The objects where ``mask`` holds."""
        return Objects(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(batch.schema.get_field_index(name))


def read_collection(batch: pa.RecordBatch, branches: CollectionBranches, name: str) -> Objects:
    """A collection's branches of one batch -> flat arrays (objects failing ``id`` dropped)."""
    first = branches.px or branches.pt
    assert first is not None
    offsets = list_offsets(_column(batch, first))
    n = int(offsets[-1])

    def values(branch: str | None, default: float = 0.0) -> np.ndarray:
        if branch is None:
            return np.full(n, default)
        column = _column(batch, branch)
        if not np.array_equal(list_offsets(column), offsets):
            raise StageFailedError(f"hep_event_features: {name} branch {branch!r} has other lengths than {first!r}")
        return flat_values(column)

    if branches.px is not None:
        px, py, pz = values(branches.px), values(branches.py), values(branches.pz)
        pt = np.hypot(px, py)
        eta = np.arcsinh(np.divide(pz, pt, out=np.zeros(n), where=pt > 0))
        phi = np.arctan2(py, px)
    else:
        pt, eta, phi = values(branches.pt), values(branches.eta), values(branches.phi)
        px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    if branches.e is not None:
        e = values(branches.e)
    else:
        mass = values(branches.mass, branches.mass_value)
        e = np.sqrt(px**2 + py**2 + pz**2 + mass**2)
    iso = np.column_stack(
        [
            values(branches.iso) + values(branches.iso_ch),  # a combined isolation goes to the charged slot
            values(branches.iso_gamma),
            values(branches.iso_neu),
        ]
    )
    if not branches.iso_relative:
        iso = np.divide(iso, pt[:, None], out=np.zeros_like(iso), where=pt[:, None] > 0)
    event = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    position = np.arange(n) - offsets[event]
    objects = Objects(event, position, px, py, pz, e, pt, eta, phi, values(branches.charge), iso, values(branches.btag))
    if branches.id is not None:
        objects = objects.take(values(branches.id) != 0)
    return objects


def _empty() -> Objects:
    z = np.zeros(0)
    return Objects(z.astype(np.int64), z.astype(np.int64), z, z, z, z, z, z, z, z, np.zeros((0, 3)), z)


def event_features(batch: pa.RecordBatch, params: HepEventFeaturesParams) -> tuple[np.ndarray, Any, Any]:
    """(selected mask, hfeatures (k, 14), (particle offsets, particles (m, 19))) for one batch."""
    n_events = batch.num_rows
    coll = {
        name: read_collection(batch, branches, name) if branches is not None else _empty()
        for name, branches in (
            (MUON, params.muons),
            (ELECTRON, params.electrons),
            (PHOTON, params.photons),
            (JET, params.jets),
        )
    }
    selected, lead_flavour, lead_index = _leading_lepton(coll, params, n_events)
    offsets, p_feat, counts = _particles(coll, params, selected, lead_flavour, lead_index, n_events)
    hfeatures = _high_level(batch, coll, params, selected, (offsets, p_feat, counts), n_events)
    return selected, hfeatures, (offsets, p_feat)


def _leading_lepton(
    coll: dict[str, Objects], params: HepEventFeaturesParams, n_events: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(events with an isolated lepton, the leading one's flavour (0 muon, 1 electron) and index; -1: none)."""
    # isolated lepton candidates; the leading one per event becomes particle 0
    leptons = [coll[MUON], coll[ELECTRON]]
    cand_event = np.concatenate([c.event for c in leptons])
    cand_pt = np.concatenate([c.pt for c in leptons])
    cand_iso = np.concatenate([c.iso.sum(axis=1) for c in leptons])
    cand_flavour = np.concatenate([np.zeros(len(leptons[0].pt), int), np.ones(len(leptons[1].pt), int)])
    cand_index = np.concatenate([np.arange(len(c.pt)) for c in leptons])
    good = (cand_pt > params.lepton_pt_min) & (cand_iso < params.lepton_iso_max)
    order = np.lexsort((-cand_pt[good], cand_event[good]))
    ev_sorted = cand_event[good][order]
    events_with, first = np.unique(ev_sorted, return_index=True)
    selected = np.zeros(n_events, dtype=bool)
    selected[events_with] = True
    lead_flavour = np.full(n_events, -1)
    lead_index = np.full(n_events, -1)
    lead_flavour[events_with] = cand_flavour[good][order][first]
    lead_index[events_with] = cand_index[good][order][first]

    return selected, lead_flavour, lead_index


def _particles(
    coll: dict[str, Objects],
    params: HepEventFeaturesParams,
    selected: np.ndarray,
    lead_flavour: np.ndarray,
    lead_index: np.ndarray,
    n_events: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The selected events' particles: (offsets, particles (m, 19), count per selected event)."""
    # the particle table: (event, group, position) sorted; group 0 is the leading lepton
    groups = []
    for group, (name, flags) in enumerate(
        [(MUON, (0, 0, 0, 0, 1)), (ELECTRON, (0, 0, 0, 1, 0)), (PHOTON, (0, 0, 1, 0, 0)), (JET, (0, 0, 0, 0, 0))],
        start=1,
    ):
        if name == JET and not params.jets_as_particles:
            continue
        c = coll[name]
        index = np.arange(len(c.pt))
        is_lead = lead_index[c.event] == index if group <= 2 else np.zeros(len(index), bool)
        if group <= 2:
            is_lead &= lead_flavour[c.event] == group - 1
        features = np.column_stack(
            [
                c.e,
                c.px,
                c.py,
                c.pz,
                c.pt,
                c.eta,
                c.phi,
                np.zeros((len(index), 3)),  # vertex: not in these inputs
                c.iso,
                np.tile(np.asarray(flags, dtype=np.float64), (len(index), 1)),
                c.charge,
            ]
        )
        groups.append((c.event, np.where(is_lead, 0, group), c.position, features))
    p_event = np.concatenate([g[0] for g in groups])
    p_group = np.concatenate([g[1] for g in groups])
    p_pos = np.concatenate([g[2] for g in groups])
    p_feat = np.concatenate([g[3] for g in groups]) if groups else np.zeros((0, 19))
    keep = selected[p_event]
    order = np.lexsort((p_pos[keep], p_group[keep], p_event[keep]))
    p_event, p_feat = p_event[keep][order], p_feat[keep][order]
    counts = np.bincount(p_event, minlength=n_events)[selected]
    if params.max_particles is not None:
        rank = np.arange(len(p_event)) - np.repeat(np.cumsum(counts) - counts, counts)
        p_feat = p_feat[rank < params.max_particles]
        counts = np.minimum(counts, params.max_particles)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])

    return offsets, p_feat, counts


def _high_level(
    batch: pa.RecordBatch,
    coll: dict[str, Objects],
    params: HepEventFeaturesParams,
    selected: np.ndarray,
    particles: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_events: int,
) -> np.ndarray:
    """The 14 high-level features of the selected events (the leading lepton is each one's first particle)."""
    offsets, p_feat, counts = particles
    jets = coll[JET]
    good_jet = (jets.pt > params.jet_pt_min) & (np.abs(jets.eta) < params.jet_eta_max)
    ht = np.bincount(jets.event[good_jet], weights=jets.pt[good_jet], minlength=n_events)
    n_jets = np.bincount(jets.event[good_jet], minlength=n_events).astype(np.float64)
    b_jet = (
        good_jet & (jets.btag > params.btag_min) if params.jets and params.jets.btag else np.zeros(len(jets.pt), bool)
    )
    n_b = np.bincount(jets.event[b_jet], minlength=n_events).astype(np.float64)
    met_x, met_y = _met(batch, params, n_events)
    met = np.hypot(met_x, met_y)
    phi_met = np.arctan2(met_y, met_x)
    lep = p_feat[offsets[:-1]] if len(counts) else np.zeros((0, 19))
    sel_met, sel_phi_met = met[selected], phi_met[selected]
    mt = np.sqrt(np.maximum(2 * lep[:, 4] * sel_met * (1 - np.cos(lep[:, 6] - sel_phi_met)), 0.0))
    hfeatures = np.column_stack(
        [
            ht[selected],
            sel_met,
            sel_phi_met,
            mt,
            n_jets[selected],
            n_b[selected],
            lep[:, 4],
            lep[:, 5],
            lep[:, 6],
            lep[:, 10],
            lep[:, 11],
            lep[:, 12],
            lep[:, 18],
            lep[:, 16],
        ]
    )
    return hfeatures


def _met(batch: pa.RecordBatch, params: HepEventFeaturesParams, n: int) -> tuple[np.ndarray, np.ndarray]:
    def scalar(name: str) -> np.ndarray:
        return np.asarray(_column(batch, name).to_numpy(zero_copy_only=False), dtype=np.float64)

    if params.met_px and params.met_py:
        return scalar(params.met_px), scalar(params.met_py)
    if params.met_pt and params.met_phi:
        pt, phi = scalar(params.met_pt), scalar(params.met_phi)
        return pt * np.cos(phi), pt * np.sin(phi)
    return np.zeros(n), np.zeros(n)


def needed_columns(params: HepEventFeaturesParams) -> list[str]:
    """Every input column the kind reads, in a stable order."""
    names: list[str] = []
    for branches in (params.muons, params.electrons, params.photons, params.jets):
        if branches is not None:
            names += branches.branches()
    names += [n for n in (params.met_px, params.met_py, params.met_pt, params.met_phi, params.label_col) if n]
    names += [params.event_id_col] if params.event_id_col else []
    names += params.keep_columns
    return list(dict.fromkeys(names))


def seed_spark_schema(extra: list[T.StructField] | None = None) -> T.StructType:
    """The seed schema as Spark declares it (nothing nullable), then the ``extra`` fields kept."""
    doubles = T.ArrayType(T.DoubleType(), containsNull=False)
    return T.StructType(
        [
            T.StructField("event_id", T.LongType(), nullable=False),
            T.StructField("hfeatures", doubles, nullable=False),
            T.StructField("lfeatures", T.ArrayType(doubles, containsNull=False), nullable=False),
            T.StructField("label", T.IntegerType(), nullable=False),
            *(extra or []),
        ]
    )


def build_event_features(
    df: DataFrame,
    params: HepEventFeaturesParams,
    metrics: dict[str, Any] | None = None,
    keep: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """Selected events in the seed schema (event_id, hfeatures, lfeatures, label, kept columns).

    With ``metrics``, the result is cached by ``keep`` (a stage's ``ctx.persist``, released once its
    outputs are written) and the events in and selected are counted into ``metrics``.
    """
    needed = needed_columns(params)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        close = difflib.get_close_matches(missing[0], df.columns, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise StageFailedError(
            f"hep_event_features: the input has no column(s) {missing}{hint};"
            f" set the branch names in the params (columns: {df.columns})"
        )
    id_col = params.event_id_col or _EVENT_ID
    source = df.select(*needed, *([] if params.event_id_col else [F.monotonically_increasing_id().alias(_EVENT_ID)]))
    kept = [f for f in df.schema.fields if f.name in params.keep_columns]
    schema = seed_spark_schema(kept)

    def transform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            selected, hfeatures, (offsets, particles) = event_features(batch, params)
            mask = pa.array(selected)
            ids = np.asarray(_column(batch, id_col).to_numpy(zero_copy_only=False), dtype=np.int64)[selected]
            if params.label_col is not None:
                labels = np.asarray(_column(batch, params.label_col).to_numpy(zero_copy_only=False))[selected]
            else:
                labels = np.full(int(selected.sum()), params.label)
            columns = [
                pa.array(ids),
                to_list(hfeatures),
                to_nested_list(offsets, particles),
                pa.array(labels.astype(np.int32)),
                *[_column(batch, f.name).filter(mask) for f in kept],
            ]
            yield pa.RecordBatch.from_arrays(columns, names=schema.fieldNames())

    result = source.mapInArrow(transform, schema)
    if metrics is not None:
        # the runtime writes the cached result, so counting the selection costs no second pass
        result = keep(result) if keep is not None else result.persist(StorageLevel.MEMORY_AND_DISK)
        events_in = df.count()
        events_selected = result.count()
        metrics.update(
            events_in=events_in,
            events_selected=events_selected,
            events_rejected=events_in - events_selected,
        )
    return result
