"""Synthetic topology-classifier events (QCD, tt, W+jets) in the seed schema, with numpy.

A simplified but self-consistent picture of a lepton-triggered LHC event, generated for a chunk of
events at once (flat arrays + event indices, no per-event Python):

- the lepton comes from a W decay (W+jets: soft W recoiling against the jets; tt: a W from a top
  decay, harder) generated in the W rest frame and boosted, so MT shows the Jacobian edge near the
  W mass; in QCD it is a soft lepton next to a (b) jet with a little MET from resolution;
- jets (tt: two b jets and two light jets plus radiation; W+jets: few; QCD: a dijet plus
  radiation) fragment into charged hadrons, photons and neutral hadrons around their axes, on top
  of an underlying event; b-jet tracks are displaced;
- every particle's Pt, Eta, Phi and E follow from its momentum and mass; the lepton's isolation is
  the pT of the particles in a 0.3 cone around it; the jets in the HLF are sums of their
  constituents; the MET is the neutrino plus a resolution term.

Nothing here is tuned to make a classifier look good; the classes differ the way the physics does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

M_W, W_WIDTH = 80.4, 2.1
M_ELE, M_MU, M_PI, M_K0 = 0.000511, 0.10566, 0.13957, 0.49761
LEPTON_PT_MIN, LEPTON_ETA_MAX, ISO_MAX, CONE = 23.0, 2.4, 0.45, 0.3
TRACKER_ETA = 2.5
MAX_TRACKS, MAX_PHOTONS, MAX_NEUTRAL = 450, 150, 200  # the original's caps
QCD, TT, WJETS = 0, 1, 2
N_FEATURES = 19
CHUNK_EVENTS = 1000  # events per random stream: the data depends on (seed, events) only


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


def _wrap(phi: np.ndarray) -> np.ndarray:
    return (phi + math.pi) % (2 * math.pi) - math.pi


def _boost(
    e: np.ndarray, p: np.ndarray, parent_e: np.ndarray, parent_p: np.ndarray, parent_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Boost (e, p) from the parent's rest frame to the lab (parent four-momentum given)."""
    gamma = parent_e / parent_m
    beta = parent_p / parent_e[:, None]
    bp = np.einsum("ij,ij->i", beta, p)
    # (gamma - 1) / beta^2 written as gamma^2 / (gamma + 1): finite at rest
    coeff = gamma**2 / (gamma + 1) * bp + gamma * e
    return gamma * (e + bp), p + coeff[:, None] * beta


def _w_decay(
    rng: np.random.Generator, n: int, w_pt_scale: np.ndarray, w_y_sigma: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lepton and neutrino momenta (n, 3) from W bosons with the given pT scale and rapidity spread."""
    mass = np.clip(M_W + W_WIDTH / 2 * np.tan(math.pi * (rng.random(n) - 0.5)), 60.0, 100.0)
    w_pt = rng.exponential(w_pt_scale) + rng.exponential(3.0, n)
    w_phi = rng.uniform(-math.pi, math.pi, n)
    w_y = rng.normal(0.0, w_y_sigma)
    mt = np.hypot(mass, w_pt)
    w_p = np.stack([w_pt * np.cos(w_phi), w_pt * np.sin(w_phi), mt * np.sinh(w_y)], axis=1)
    w_e = mt * np.cosh(w_y)
    cos_t = rng.uniform(-1.0, 1.0, n)
    sin_t = np.sqrt(1 - cos_t**2)
    phi = rng.uniform(-math.pi, math.pi, n)
    p_star = np.stack([sin_t * np.cos(phi), sin_t * np.sin(phi), cos_t], axis=1) * (mass / 2)[:, None]
    _, lepton = _boost(mass / 2, p_star, w_e, w_p, mass)
    _, neutrino = _boost(mass / 2, -p_star, w_e, w_p, mass)
    return lepton, neutrino, w_phi


def _pt_eta_phi(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pt = np.hypot(p[:, 0], p[:, 1])
    return pt, np.arcsinh(p[:, 2] / np.maximum(pt, 1e-12)), np.arctan2(p[:, 1], p[:, 0])


def _leptons(
    rng: np.random.Generator, label: np.ndarray, jet_eta0: np.ndarray, jet_phi0: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lepton momentum (n, 3) and neutrino transverse momentum (n, 2); every lepton passes the cuts."""
    n = len(label)
    lepton = np.zeros((n, 3))
    neutrino = np.zeros((n, 2))
    w_phi = rng.uniform(-math.pi, math.pi, n)
    todo = np.arange(n)
    for _ in range(200):  # acceptance by resampling the failures; converges in a handful of rounds
        if len(todo) == 0:
            break
        lab = label[todo]
        w_like = lab != QCD
        idx = todo[w_like]
        if len(idx):
            scale = np.where(label[idx] == TT, 55.0, 12.0)
            ysig = np.where(label[idx] == TT, 0.9, 1.3)
            lep, nu, wphi = _w_decay(rng, len(idx), scale, ysig)
            lepton[idx], neutrino[idx], w_phi[idx] = lep, nu[:, :2], wphi
        idx = todo[~w_like]
        if len(idx):
            # a lepton from a heavy-flavour decay, next to the leading jet, with a soft neutrino
            pt = LEPTON_PT_MIN + rng.exponential(9.0, len(idx))
            r = rng.uniform(0.05, 0.6, len(idx))
            a = rng.uniform(-math.pi, math.pi, len(idx))
            eta = jet_eta0[idx] + r * np.cos(a)
            phi = _wrap(jet_phi0[idx] + r * np.sin(a))
            lepton[idx] = np.stack([pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)], axis=1)
            nu_pt = rng.exponential(4.0, len(idx))
            neutrino[idx] = np.stack([nu_pt * np.cos(phi), nu_pt * np.sin(phi)], axis=1)
        pt, eta, _ = _pt_eta_phi(lepton[todo])
        todo = todo[(pt <= LEPTON_PT_MIN + 0.5) | (np.abs(eta) >= LEPTON_ETA_MAX)]
    if len(todo):  # practically never: push the stragglers into the acceptance
        lepton[todo, :2] *= ((LEPTON_PT_MIN + 1.0) / np.maximum(np.hypot(lepton[todo, 0], lepton[todo, 1]), 1e-9))[
            :, None
        ]
        lepton[todo, 2] = 0.0
    return lepton, neutrino, w_phi


def generate_chunk(config: GeneratorConfig, chunk_id: int, first_event: int, n: int) -> Events:
    """Generate ``n`` events with the random stream of chunk ``chunk_id`` (seeded by (seed, chunk))."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, chunk_id]))
    label = rng.choice(3, size=n, p=np.asarray(config.class_fractions) / sum(config.class_fractions))

    # jets: axes, pT and b flags; the jet table is flat with its event index
    n_jets = np.select(
        [label == TT, label == WJETS],
        [4 + rng.poisson(0.8, n), rng.poisson(0.9, n)],
        2 + rng.poisson(1.0, n),
    )
    jet_event = np.repeat(np.arange(n), n_jets)
    jet_rank = np.arange(len(jet_event)) - np.repeat(np.cumsum(n_jets) - n_jets, n_jets)
    jet_label = label[jet_event]
    jet_pt = np.where(jet_label == TT, 25.0 + rng.exponential(45.0, len(jet_event)), 20.0)
    jet_pt = np.where(jet_label != TT, 20.0 + rng.exponential(28.0, len(jet_event)), jet_pt)
    jet_eta = np.clip(rng.normal(0.0, np.where(jet_label == TT, 1.1, 1.6)), -TRACKER_ETA, TRACKER_ETA)
    jet_phi = rng.uniform(-math.pi, math.pi, len(jet_event))
    jet_b = np.select(
        [jet_label == TT, jet_label == QCD],
        [jet_rank < 2, rng.random(len(jet_event)) < 0.15],
        rng.random(len(jet_event)) < 0.03,
    )
    first_jet = np.cumsum(n_jets) - n_jets
    has_jet = n_jets > 0
    jet_eta0 = np.zeros(n)
    jet_phi0 = rng.uniform(-math.pi, math.pi, n)
    jet_eta0[has_jet] = jet_eta[first_jet[has_jet]]
    jet_phi0[has_jet] = jet_phi[first_jet[has_jet]]

    lepton, neutrino, w_phi = _leptons(rng, label, np.clip(jet_eta0, -1.8, 1.8), jet_phi0)
    # W+jets: the leading jet recoils against the W
    recoil = has_jet & (label == WJETS)
    jet_phi[first_jet[recoil]] = _wrap(w_phi[recoil] + math.pi + rng.normal(0.0, 0.4, recoil.sum()))

    # particle counts per event and type: underlying event + per-jet fragmentation
    jet_activity = np.bincount(jet_event, weights=4.0 + jet_pt / 12.0, minlength=n)
    mean_charged = config.multiplicity * (12.0 + jet_activity)
    budget = config.max_particles - 1
    n_ch = np.minimum(rng.poisson(mean_charged), min(MAX_TRACKS, budget))
    n_ph = np.minimum(rng.poisson(0.5 * mean_charged), np.minimum(MAX_PHOTONS, budget - n_ch))
    n_nh = np.minimum(rng.poisson(0.25 * mean_charged), np.minimum(MAX_NEUTRAL, budget - n_ch - n_ph))
    kinds = [(n_ch, 0), (n_ph, 1), (n_nh, 2)]  # 0 charged hadron, 1 photon, 2 neutral hadron
    p_event = np.concatenate([np.repeat(np.arange(n), c) for c, _ in kinds])
    p_kind = np.concatenate([np.full(c.sum(), k) for c, k in kinds])
    total = len(p_event)

    # jet membership: a particle belongs to a jet with probability ~ the jets' share of activity
    share = jet_activity / (12.0 + jet_activity)
    in_jet = (rng.random(total) < share[p_event]) & has_jet[p_event]
    jet_of = np.full(total, -1)
    pick = np.minimum(
        (rng.random(in_jet.sum()) * n_jets[p_event[in_jet]]).astype(np.int64), n_jets[p_event[in_jet]] - 1
    )
    jet_of[in_jet] = first_jet[p_event[in_jet]] + pick

    weight = rng.exponential(1.0, total)
    weight_sum = np.bincount(jet_of[in_jet], weights=weight[in_jet], minlength=len(jet_event))
    pt = 0.3 + rng.exponential(0.9, total)
    eta = rng.uniform(-TRACKER_ETA, TRACKER_ETA, total)
    phi = rng.uniform(-math.pi, math.pi, total)
    j = jet_of[in_jet]
    pt[in_jet] = jet_pt[j] * weight[in_jet] / weight_sum[j]
    spread = 0.12 * np.sqrt(30.0 / np.maximum(jet_pt[j], 30.0))
    eta[in_jet] = np.clip(jet_eta[j] + rng.normal(0.0, spread), -TRACKER_ETA, TRACKER_ETA)
    phi[in_jet] = _wrap(jet_phi[j] + rng.normal(0.0, spread))
    mass = np.choose(p_kind, [M_PI, 0.0, M_K0])
    charge = np.where(p_kind == 0, rng.choice([-1.0, 1.0], total), 0.0)

    p = np.stack([pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)], axis=1)

    # lepton isolation: particles in a 0.3 cone; an event over the CERN cut (0.45) has its in-cone
    # particles softened to pass it, as the selection would have kept only such events
    lep_pt, lep_eta, lep_phi = _pt_eta_phi(lepton)
    d_eta = eta - lep_eta[p_event]
    d_phi = _wrap(phi - lep_phi[p_event])
    in_cone = d_eta**2 + d_phi**2 < CONE**2
    cone_pt = np.bincount(p_event[in_cone], weights=pt[in_cone], minlength=n)
    target = lep_pt * ISO_MAX * rng.uniform(0.3, 0.95, n)
    soften = np.where(cone_pt > lep_pt * ISO_MAX, target / np.maximum(cone_pt, 1e-12), 1.0)
    p[in_cone] *= soften[p_event[in_cone]][:, None]
    pt = np.hypot(p[:, 0], p[:, 1])
    lep_iso = (
        np.stack(
            [
                np.bincount(p_event[in_cone & (p_kind == k)], weights=pt[in_cone & (p_kind == k)], minlength=n)
                for k in range(3)
            ],
            axis=1,
        )
        / lep_pt[:, None]
    )

    # per-particle isolation: the same-type pT of the particle's jet (70% of a jet is within 0.3 of
    # its constituents) or, outside jets, the underlying-event density times the cone area
    iso = np.zeros((total, 3))
    ue_fraction = math.pi * CONE**2 / (2 * TRACKER_ETA * 2 * math.pi)
    for k in range(3):
        own = p_kind == k
        in_jet_k = in_jet & own
        jet_sum = np.bincount(jet_of[in_jet_k], weights=pt[in_jet_k], minlength=len(jet_event))
        ue_k = ~in_jet & own
        ue_sum = np.bincount(p_event[ue_k], weights=pt[ue_k], minlength=n)
        iso[in_jet, k] = 0.7 * jet_sum[jet_of[in_jet]] - np.where(own[in_jet], pt[in_jet], 0.0)
        iso[~in_jet, k] = ue_fraction * ue_sum[p_event[~in_jet]] - np.where(own[~in_jet], pt[~in_jet], 0.0)
    iso = np.maximum(iso, 0.0) / np.maximum(pt, 1e-12)[:, None]

    # vertices (cm): a primary vertex per event; tracks smeared, b-jet tracks displaced along p
    pv = np.stack([rng.normal(0, 0.0015, n), rng.normal(0, 0.0015, n), rng.normal(0, 4.0, n)], axis=1)
    vtx = pv[p_event].copy()
    charged = p_kind == 0
    vtx[charged] += rng.normal(0.0, 0.002, (charged.sum(), 3))
    from_b = in_jet & charged & np.isin(jet_of, np.flatnonzero(jet_b)) & (rng.random(total) < 0.4)
    flight = rng.exponential(0.25, from_b.sum())
    vtx[from_b] += p[from_b] / np.linalg.norm(p[from_b], axis=1)[:, None] * flight[:, None]

    # assemble lfeatures: the lepton first, then charged hadrons, photons, neutral hadrons
    is_ele = rng.random(n) < 0.5
    plus = rng.random(n) < np.where(label == WJETS, 0.6, 0.5)  # pp makes more W+ than W-
    lep_charge = np.where(plus, 1.0, -1.0)
    lep_mass = np.where(is_ele, M_ELE, M_MU)
    all_p = np.concatenate([lepton, p])
    all_mass = np.concatenate([lep_mass, mass])
    all_event = np.concatenate([np.arange(n), p_event])
    order = np.argsort(all_event, kind="stable")
    all_p, all_mass = all_p[order], all_mass[order]
    flags = np.zeros((n + total, 5))  # isChHad, isNeuHad, isGamma, isEle, isMu
    flags[n:][p_kind == 0, 0] = 1.0
    flags[n:][p_kind == 2, 1] = 1.0
    flags[n:][p_kind == 1, 2] = 1.0
    flags[:n, 3] = is_ele
    flags[:n, 4] = ~is_ele
    all_vtx = np.concatenate([pv, vtx])[order]
    all_iso = np.concatenate([lep_iso, iso])[order]
    all_charge = np.concatenate([lep_charge, charge])[order]
    flags = flags[order]
    a_pt, a_eta, a_phi = _pt_eta_phi(all_p)
    energy = np.sqrt(np.einsum("ij,ij->i", all_p, all_p) + all_mass**2)
    particles = np.column_stack([energy, all_p, a_pt, a_eta, a_phi, all_vtx, all_iso, flags, all_charge])
    counts = 1 + n_ch + n_ph + n_nh
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])

    # high-level features from the same objects
    jpx = np.bincount(jet_of[in_jet], weights=p[in_jet, 0], minlength=len(jet_event))
    jpy = np.bincount(jet_of[in_jet], weights=p[in_jet, 1], minlength=len(jet_event))
    jpz = np.bincount(jet_of[in_jet], weights=p[in_jet, 2], minlength=len(jet_event))
    reco_pt = np.hypot(jpx, jpy)
    reco_eta = np.arcsinh(jpz / np.maximum(reco_pt, 1e-12))
    good = (reco_pt > 30.0) & (np.abs(reco_eta) < LEPTON_ETA_MAX)
    tagged = good & (rng.random(len(jet_event)) < np.where(jet_b, 0.7, 0.02))
    ht = np.bincount(jet_event[good], weights=reco_pt[good], minlength=n)
    n_good = np.bincount(jet_event[good], minlength=n).astype(np.float64)
    n_b = np.bincount(jet_event[tagged], minlength=n).astype(np.float64)
    sum_et = np.bincount(p_event, weights=pt, minlength=n) + lep_pt
    resolution = rng.normal(0.0, 0.5 * np.sqrt(sum_et)[:, None], (n, 2))
    met_vec = neutrino + resolution
    met = np.hypot(met_vec[:, 0], met_vec[:, 1])
    phi_met = np.arctan2(met_vec[:, 1], met_vec[:, 0])
    mt = np.sqrt(np.maximum(2 * lep_pt * met * (1 - np.cos(lep_phi - phi_met)), 0.0))
    hfeatures = np.column_stack(
        [ht, met, phi_met, mt, n_good, n_b, lep_pt, lep_eta, lep_phi, lep_iso, lep_charge, is_ele.astype(np.float64)]
    )
    event_id = np.arange(first_event, first_event + n, dtype=np.int64)
    return Events(event_id, hfeatures, offsets, particles, label.astype(np.int32))
