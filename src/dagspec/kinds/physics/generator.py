"""Synthetic topology-classifier events (QCD, tt, W+jets) in the seed schema, with numpy.

A synthetic stand-in for a Delphes-simulated, lepton-triggered LHC event, not physics: generated
for a chunk of events at once (flat arrays + event indices, no per-event Python), in three steps.

1. The hard process (``generator_partons``): the lepton, the neutrino and the partons per class.
2. Particles: every parton fragments into charged hadrons, photons and neutral hadrons (gluon jets
   wider, with more and softer particles than quark jets; b and c jets with displaced tracks), on
   top of an underlying event that grows with the hard activity, pile-up (soft particles from other
   vertices along the beam, plus a few pile-up jets).
3. The detector: tracking efficiency and momentum resolution, calorimeter resolution and
   thresholds for photons and neutral hadrons, the lepton's resolution. The 14 HLF are computed
   from what is detected: jets are the sums of their detected constituents plus the pile-up
   offset, smeared by a jet resolution, counted above 30 GeV with an identification efficiency;
   b tagging has a per-jet efficiency and mistag rate; the MET is the neutrino plus the jets'
   mismeasurement plus a soft term growing with the scalar sum (pile-up included); the lepton's
   isolation is the cone sum (0.3) of the detected particles, pile-up charged tracks removed.

The classes differ partly in what the HLF count (jets, b tags, MT, isolation) and partly in
particle-level structure they summarize badly: the b jet next to the lepton in tt (its displaced
tracks, its DeltaR), quark against gluon jets, the soft activity around the lepton. ``lfeatures``
keeps the ``max_particles`` particles nearest to the lepton (the lepton first), as the feature
stage's truncation would; the HLF are computed from the whole event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dagspec.kinds.physics.generator_partons import (
    BOTTOM,
    CHARM,
    GLUON,
    LEPTON_ETA_MAX,
    WJETS,
    Partons,
    hard_process,
    momentum,
    pt_eta_phi,
    wrap,
)

M_ELE, M_MU, M_PI, M_K0 = 0.000511, 0.10566, 0.13957, 0.49761
ISO_MAX, CONE, JET_AREA = 0.45, 0.3, math.pi * 0.4**2
TRACKER_ETA = 2.5
AREA = 2 * TRACKER_ETA * 2 * math.pi
N_FEATURES = 19
CHUNK_EVENTS = 1000  # events per random stream: the data depends on (seed, events) only
PILEUP_PARTICLES, PILEUP_JETS, PILEUP_VERTICES = 45.0, 0.3, 16
B_TAG = {BOTTOM: 0.58, CHARM: 0.15}  # per-jet tag efficiency; light and gluon jets: MISTAG
MISTAG = 0.015


@dataclass(frozen=True)
class GeneratorConfig:
    """What shapes the events (from the kind's params)."""

    seed: int = 42
    max_particles: int = 801
    multiplicity: float = 1.0
    class_fractions: tuple[float, float, float] = (0.056, 0.560, 0.384)


@dataclass(frozen=True)
class Events:
    """A chunk of events: hfeatures (n, 14), particle offsets (n + 1), particles (total, 19), labels."""

    event_id: np.ndarray
    hfeatures: np.ndarray
    offsets: np.ndarray
    particles: np.ndarray
    label: np.ndarray


def chunk_bounds(events: int) -> list[tuple[int, int, int]]:
    """(chunk id, first event id, number of events) covering ``events``."""
    return [(i, start, min(CHUNK_EVENTS, events - start)) for i, start in enumerate(range(0, events, CHUNK_EVENTS))]


@dataclass
class _Particles:
    """Flat generated particles: event, kind (0 charged hadron, 1 photon, 2 neutral hadron), jet index
    (-1: none), pile-up flag, b/c flight length (cm), momentum (k, 3)."""

    event: np.ndarray
    kind: np.ndarray
    jet: np.ndarray
    pileup: np.ndarray
    flight: np.ndarray
    p: np.ndarray

    def take(self, keep: np.ndarray) -> _Particles:
        return _Particles(*(getattr(self, f)[keep] for f in ("event", "kind", "jet", "pileup", "flight", "p")))


def _kinds(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.searchsorted(np.array([0.6, 0.87]), rng.random(k)).astype(np.int8)


def _fragment(rng: np.random.Generator, jets: Partons, pileup_jet: np.ndarray, multiplicity: float) -> _Particles:
    """Constituents of every jet: gluon jets wider and softer, b and c jets with displaced tracks."""
    fl = jets.flavour.astype(np.int64)
    mean = multiplicity * (3.0 + jets.pt / 10.0) * np.choose(fl, [1.0, 1.5, 1.2, 1.25])
    counts = 1 + rng.poisson(mean)
    jet = np.repeat(np.arange(len(counts)), counts)
    k = len(jet)
    weight = rng.exponential(1.0, k) ** np.choose(fl, [1.6, 1.0, 1.4, 1.3])[jet]
    share = weight / np.bincount(jet, weights=weight, minlength=len(counts))[jet]
    pt = jets.pt[jet] * share
    width = np.choose(fl, [0.08, 0.15, 0.10, 0.12])[jet] * np.sqrt(30.0 / np.maximum(jets.pt[jet], 30.0))
    sigma = width * (1.2 - np.minimum(share, 0.8))  # the hard core is narrow
    eta = np.clip(jets.eta[jet] + rng.normal(0.0, sigma), -TRACKER_ETA, TRACKER_ETA)
    phi = wrap(jets.phi[jet] + rng.normal(0.0, sigma))
    kind = _kinds(rng, k)
    heavy = np.select([fl[jet] == BOTTOM, fl[jet] == CHARM], [0.6, 0.3], 0.0)
    displaced = (kind == 0) & (rng.random(k) < heavy)
    flight = np.where(displaced, rng.exponential(np.where(fl[jet] == BOTTOM, 0.3, 0.1)), 0.0)
    return _Particles(jets.event[jet], kind, jet, pileup_jet[jet], flight, momentum(pt, eta, phi))


def _soft(rng: np.random.Generator, n: int, mean: np.ndarray, pt_scale: float, pileup: bool) -> _Particles:
    """Soft particles spread over the tracker (underlying event or pile-up)."""
    counts = rng.poisson(mean)
    event = np.repeat(np.arange(n), counts)
    k = len(event)
    pt = 0.3 + rng.exponential(pt_scale, k)
    eta = rng.uniform(-TRACKER_ETA, TRACKER_ETA, k)
    phi = rng.uniform(-math.pi, math.pi, k)
    return _Particles(event, _kinds(rng, k), np.full(k, -1), np.full(k, pileup), np.zeros(k), momentum(pt, eta, phi))


def _concat(parts: list[_Particles]) -> _Particles:
    fields = ("event", "kind", "jet", "pileup", "flight", "p")
    merged = _Particles(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))
    return merged.take(np.argsort(merged.event * 3 + merged.kind, kind="stable"))  # by event, then kind


def _detect(rng: np.random.Generator, parts: _Particles) -> _Particles:
    """Tracking efficiency and resolution; calorimeter resolution and thresholds."""
    k = len(parts.event)
    pt = np.hypot(parts.p[:, 0], parts.p[:, 1])
    energy = np.linalg.norm(parts.p, axis=1)
    stochastic = np.choose(parts.kind, [0.0, 0.05, 1.0]) / np.sqrt(np.maximum(energy, 1e-3))
    constant = np.choose(parts.kind, [0.01, 0.01, 0.05])
    scale = np.maximum(rng.normal(1.0, np.hypot(stochastic, constant)), 0.05)
    parts.p *= scale[:, None]
    energy *= scale
    efficiency = np.where(parts.kind == 0, np.where(pt > 1.0, 0.97, 0.88), 1.0)
    threshold = np.choose(parts.kind, [0.0, 0.5, 1.0])
    return parts.take((rng.random(k) < efficiency) & (energy > threshold))


def generate_chunk(config: GeneratorConfig, chunk_id: int, first_event: int, n: int) -> Events:
    """Generate ``n`` events with the random stream of chunk ``chunk_id`` (seeded by (seed, chunk))."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, chunk_id]))
    label = rng.choice(3, size=n, p=np.asarray(config.class_fractions) / sum(config.class_fractions))
    hard = hard_process(rng, label)
    mult = config.multiplicity

    # pile-up jets join the partons (flagged), then everything fragments
    n_pu_jets = rng.poisson(PILEUP_JETS, n)
    pu_event = np.repeat(np.arange(n), n_pu_jets)
    k = len(pu_event)
    pu_eta, pu_phi = rng.uniform(-TRACKER_ETA, TRACKER_ETA, k), rng.uniform(-math.pi, math.pi, k)
    jets = Partons(
        np.concatenate([hard.partons.event, pu_event]),
        np.concatenate([hard.partons.pt, 8.0 + rng.exponential(10.0, k)]),
        np.concatenate([hard.partons.eta, pu_eta]),
        np.concatenate([hard.partons.phi, pu_phi]),
        np.concatenate([hard.partons.flavour, np.full(k, GLUON, dtype=np.int8)]),
    )
    pileup_jet = np.arange(len(jets.event)) >= len(hard.partons.event)
    hard_pt = np.bincount(hard.partons.event, weights=hard.partons.pt, minlength=n)
    parts = _detect(
        rng,
        _concat(
            [
                _fragment(rng, jets, pileup_jet, mult),
                _soft(rng, n, mult * (8.0 + 0.04 * hard_pt), 0.6, pileup=False),
                _soft(rng, n, np.full(n, mult * PILEUP_PARTICLES), 0.45, pileup=True),
            ]
        ),
    )
    lepton = hard.lepton * np.clip(rng.normal(1.0, 0.015, n), 0.98, 1.02)[:, None]  # stays over 23 GeV
    lep_pt, lep_eta, lep_phi = pt_eta_phi(lepton)

    # lepton isolation: detected particles in a 0.3 cone, pile-up tracks removed; an event over the
    # CERN cut (0.45) has its in-cone particles softened to pass it, as the selection kept only those
    pt, eta, phi = pt_eta_phi(parts.p)
    ev = parts.event
    d_r = np.hypot(eta - lep_eta[ev], wrap(phi - lep_phi[ev]))
    counted = (d_r < CONE) & ~((parts.kind == 0) & parts.pileup)
    cone_pt = np.bincount(ev[counted], weights=pt[counted], minlength=n)
    target = lep_pt * ISO_MAX * rng.uniform(0.05, 0.98, n) ** 2
    soften = np.where(cone_pt > lep_pt * ISO_MAX, target / np.maximum(cone_pt, 1e-12), 1.0)
    in_cone = d_r < CONE
    parts.p[in_cone] *= soften[ev[in_cone]][:, None]
    pt[in_cone] *= soften[ev[in_cone]]
    lep_iso = (
        np.stack(
            [
                np.bincount(ev[counted & (parts.kind == t)], weights=pt[counted & (parts.kind == t)], minlength=n)
                for t in range(3)
            ],
            axis=1,
        )
        / lep_pt[:, None]
    )

    plus = rng.random(n) < np.where(label == WJETS, 0.6, 0.5)  # pp makes more W+ than W-
    lep_charge = np.where(plus, 1.0, -1.0)
    is_ele = rng.random(n) < 0.5
    hfeatures = _high_level(rng, hard.neutrino, jets, parts, pt, lepton, lep_iso)
    hfeatures = np.column_stack([hfeatures, lep_charge, is_ele.astype(np.float64)])
    lead = _lepton_rows(lepton, lep_iso, lep_charge, is_ele)
    lead[:, 7:10] = lepton / np.linalg.norm(lepton, axis=1)[:, None] * hard.lepton_flight[:, None]
    particles, offsets = _particle_table(rng, config, lead, parts, pt, d_r)
    event_id = np.arange(first_event, first_event + n, dtype=np.int64)
    return Events(event_id, hfeatures, offsets, particles, label.astype(np.int32))


def _high_level(
    rng: np.random.Generator,
    neutrino: np.ndarray,
    jets: Partons,
    parts: _Particles,
    pt: np.ndarray,
    lepton: np.ndarray,
    lep_iso: np.ndarray,
) -> np.ndarray:
    """The first 12 HLF from the detected objects (see the module docstring)."""
    n, n_jets = len(lepton), len(jets.event)
    in_jet = parts.jet >= 0
    sums = [np.bincount(parts.jet[in_jet], weights=parts.p[in_jet, c], minlength=n_jets) for c in range(3)]
    raw = np.stack(sums, axis=1)
    raw_pt, reco_eta, reco_phi = pt_eta_phi(raw)
    pileup_density = np.bincount(parts.event[parts.pileup], weights=pt[parts.pileup], minlength=n) / AREA
    corrected = raw_pt + pileup_density[jets.event] * JET_AREA
    resolution = np.sqrt(0.7**2 / np.maximum(corrected, 1.0) + 0.06**2)
    reco_pt = corrected * np.maximum(rng.normal(1.0, resolution), 0.0)
    good = (reco_pt > 30.0) & (np.abs(reco_eta) < LEPTON_ETA_MAX) & (rng.random(n_jets) < 0.98)
    tag_rate = np.select([jets.flavour == BOTTOM, jets.flavour == CHARM], [B_TAG[BOTTOM], B_TAG[CHARM]], MISTAG)
    tagged = good & (rng.random(n_jets) < tag_rate)
    ht = np.bincount(jets.event[good], weights=reco_pt[good], minlength=n)
    n_good = np.bincount(jets.event[good], minlength=n).astype(np.float64)
    n_b = np.bincount(jets.event[tagged], minlength=n).astype(np.float64)

    # MET: the neutrino, the jets' mismeasurement (generated minus reconstructed), a soft term
    true_xy = momentum(jets.pt, jets.eta, jets.phi)[:, :2]
    reco_xy = np.stack([reco_pt * np.cos(reco_phi), reco_pt * np.sin(reco_phi)], axis=1)
    mismeasured = np.stack(
        [np.bincount(jets.event, weights=(true_xy - reco_xy)[:, c], minlength=n) for c in range(2)], axis=1
    )
    lep_pt, lep_eta, lep_phi = pt_eta_phi(lepton)
    sum_et = np.bincount(parts.event, weights=pt, minlength=n) + lep_pt
    met_vec = neutrino + mismeasured + rng.normal(0.0, 0.5 * np.sqrt(sum_et)[:, None], (n, 2))
    met = np.hypot(met_vec[:, 0], met_vec[:, 1])
    phi_met = np.arctan2(met_vec[:, 1], met_vec[:, 0])
    mt = np.sqrt(np.maximum(2 * lep_pt * met * (1 - np.cos(lep_phi - phi_met)), 0.0))
    return np.column_stack([ht, met, phi_met, mt, n_good, n_b, lep_pt, lep_eta, lep_phi, lep_iso])


def _lepton_rows(lepton: np.ndarray, lep_iso: np.ndarray, charge: np.ndarray, is_ele: np.ndarray) -> np.ndarray:
    """Particle 0 of every event: the lepton (its isolation and flavour; vertex filled in later)."""
    n = len(lepton)
    mass = np.where(is_ele, M_ELE, M_MU)
    energy = np.sqrt(np.einsum("ij,ij->i", lepton, lepton) + mass**2)
    pt, eta, phi = pt_eta_phi(lepton)
    flags = np.column_stack([np.zeros((n, 3)), is_ele, ~is_ele])
    return np.column_stack([energy, lepton, pt, eta, phi, np.zeros((n, 3)), lep_iso, flags, charge])


def _particle_table(
    rng: np.random.Generator,
    config: GeneratorConfig,
    lead: np.ndarray,
    parts: _Particles,
    pt: np.ndarray,
    d_r: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """lfeatures of every event: the lepton (``lead``), then the ``max_particles - 1`` particles nearest to it."""
    n = len(lead)
    ev = parts.event
    # keep the max_particles - 1 nearest to the lepton (d_r < 8 in the tracker: one float sort key)
    order = np.argsort(ev * 8.0 + np.minimum(d_r, 7.99), kind="stable")
    counts = np.bincount(ev, minlength=n)
    rank = np.arange(len(ev)) - np.repeat(np.cumsum(counts) - counts, counts)
    keep = np.sort(order[rank < config.max_particles - 1])  # back in the seed's order: charged, photons, neutral
    kept = parts.take(keep)
    ev_kept, kept_pt = kept.event, pt[keep]
    k = len(ev_kept)

    # per-particle isolation: the same-type pT of the particle's jet (70% of a jet is within 0.3 of
    # its constituents) or, outside jets, the soft-particle density times the cone area
    iso = np.zeros((k, 3))
    in_jet_all = parts.jet >= 0
    in_jet = kept.jet >= 0
    n_jets = int(parts.jet.max(initial=-1)) + 1
    cone_fraction = math.pi * CONE**2 / AREA
    for t in range(3):
        own_all = parts.kind == t
        jet_sum = np.bincount(parts.jet[in_jet_all & own_all], weights=pt[in_jet_all & own_all], minlength=n_jets)
        soft_sum = np.bincount(ev[~in_jet_all & own_all], weights=pt[~in_jet_all & own_all], minlength=n)
        mine = np.where(kept.kind == t, kept_pt, 0.0)
        iso[in_jet, t] = 0.7 * jet_sum[kept.jet[in_jet]] - mine[in_jet]
        iso[~in_jet, t] = cone_fraction * soft_sum[ev_kept[~in_jet]] - mine[~in_jet]
    iso = np.maximum(iso, 0.0) / np.maximum(kept_pt, 1e-12)[:, None]

    # vertices (cm): a primary vertex per event; tracks smeared, b/c tracks displaced along p,
    # pile-up tracks from one of the pile-up vertices along the beam
    pv = np.stack([rng.normal(0, 0.0015, n), rng.normal(0, 0.0015, n), rng.normal(0, 4.0, n)], axis=1)
    vtx = pv[ev_kept]
    charged = kept.kind == 0
    vtx[charged] += rng.normal(0.0, 0.002, (int(charged.sum()), 3))
    pu_z = rng.normal(0.0, 4.5, (n, PILEUP_VERTICES))
    pu_tracks = charged & kept.pileup & ~in_jet
    vtx[pu_tracks, 2] = pu_z[ev_kept[pu_tracks], rng.integers(0, PILEUP_VERTICES, int(pu_tracks.sum()))]
    pu_jet_tracks = charged & kept.pileup & in_jet
    vtx[pu_jet_tracks, 2] = pu_z[ev_kept[pu_jet_tracks], kept.jet[pu_jet_tracks] % PILEUP_VERTICES]
    moved = kept.flight > 0
    direction = kept.p[moved] / np.maximum(np.linalg.norm(kept.p[moved], axis=1), 1e-12)[:, None]
    vtx[moved] += direction * kept.flight[moved][:, None]

    lead[:, 7:10] += pv + rng.normal(0.0, 0.002, (n, 3))  # the lepton's track: smeared, maybe displaced
    mass = np.choose(kept.kind, [M_PI, 0.0, M_K0])
    p = kept.p
    p_pt, p_eta, p_phi = pt_eta_phi(p)
    flags = np.zeros((k, 3))
    flags[kept.kind == 0, 0] = 1.0
    flags[kept.kind == 2, 1] = 1.0
    flags[kept.kind == 1, 2] = 1.0
    charge = np.where(charged, rng.choice([-1.0, 1.0], k), 0.0)
    rows = np.column_stack(
        [
            np.sqrt(np.einsum("ij,ij->i", p, p) + mass**2),
            p,
            p_pt,
            p_eta,
            p_phi,
            vtx,
            iso,
            flags,
            np.zeros((k, 2)),
            charge,
        ]
    )
    all_rows = np.concatenate([lead, rows])
    owner = np.concatenate([np.arange(n), ev_kept])
    table = all_rows[np.argsort(owner, kind="stable")]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(1 + np.bincount(ev_kept, minlength=n), out=offsets[1:])
    return table, offsets
