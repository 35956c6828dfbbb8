"""The hard process of the synthetic events: per class, the lepton, the neutrino and the partons.

Flat arrays over a chunk of events (``Partons.event`` is each parton's event index). A toy, not
physics: the shapes only follow what distinguishes the three selections.

- tt (semileptonic): a W from a top decay gives the lepton and the neutrino; the b quark of the
  same top lands near the lepton (DeltaR 0.4 + a gamma tail); the hadronic top's b and two light
  quarks fly roughly opposite; initial-state radiation adds gluons.
- W+jets: a W recoiling against a quark (or gluon) jet, plus radiated gluons; a few per cent are
  W+bb or W+c.
- QCD: a dijet plus radiation, whose leading jet is a b or c jet containing the lepton of its
  semileptonic decay (with a soft neutrino).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

M_W, W_WIDTH = 80.4, 2.1
LEPTON_PT_MIN, LEPTON_ETA_MAX = 23.0, 2.4
QCD, TT, WJETS = 0, 1, 2
LIGHT, GLUON, CHARM, BOTTOM = 0, 1, 2, 3
JET_ETA_MAX = 2.6  # parton axes are kept inside the tracker (plus a jet radius)


@dataclass(frozen=True)
class Partons:
    """Partons (future jets) of a chunk: event index, pT, eta, phi, flavour (LIGHT..BOTTOM)."""

    event: np.ndarray
    pt: np.ndarray
    eta: np.ndarray
    phi: np.ndarray
    flavour: np.ndarray


@dataclass(frozen=True)
class HardProcess:
    """Lepton momentum (n, 3), its flight from the primary vertex (cm: a heavy-flavour decay's
    lepton is displaced, a W's is not), neutrino transverse momentum (n, 2), the partons."""

    lepton: np.ndarray
    lepton_flight: np.ndarray
    neutrino: np.ndarray
    partons: Partons


def wrap(phi: np.ndarray) -> np.ndarray:
    return (phi + math.pi) % (2 * math.pi) - math.pi


def pt_eta_phi(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pt = np.hypot(p[:, 0], p[:, 1])
    return pt, np.arcsinh(p[:, 2] / np.maximum(pt, 1e-12)), np.arctan2(p[:, 1], p[:, 0])


def momentum(pt: np.ndarray, eta: np.ndarray, phi: np.ndarray) -> np.ndarray:
    return np.stack([pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)], axis=1)


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
    rng: np.random.Generator, n: int, pt_scale: float, y_sigma: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lepton and neutrino momenta (n, 3) and the W's phi, from W bosons of this pT scale."""
    mass = np.clip(M_W + W_WIDTH / 2 * np.tan(math.pi * (rng.random(n) - 0.5)), 60.0, 100.0)
    w_pt = rng.exponential(pt_scale, n) + rng.exponential(3.0, n)
    w_phi = rng.uniform(-math.pi, math.pi, n)
    w_y = rng.normal(0.0, y_sigma, n)
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


def _accepted_w_leptons(
    rng: np.random.Generator, n: int, pt_scale: float, y_sigma: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W decays whose lepton passes pT > 23.5 GeV and |eta| < 2.4 (failures drawn again)."""
    lepton, neutrino, w_phi = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros(n)
    todo = np.arange(n)
    for _ in range(200):  # converges in a handful of rounds
        if len(todo) == 0:
            break
        lepton[todo], neutrino[todo], w_phi[todo] = _w_decay(rng, len(todo), pt_scale, y_sigma)
        pt, eta, _ = pt_eta_phi(lepton[todo])
        todo = todo[(pt <= LEPTON_PT_MIN + 0.5) | (np.abs(eta) >= LEPTON_ETA_MAX)]
    if len(todo):  # practically never: push the stragglers into the acceptance
        scale = (LEPTON_PT_MIN + 1.0) / np.maximum(np.hypot(lepton[todo, 0], lepton[todo, 1]), 1e-9)
        lepton[todo, :2] *= scale[:, None]
        lepton[todo, 2] = 0.0
    return lepton, neutrino[:, :2], w_phi


def _around(rng: np.random.Generator, eta: np.ndarray, phi: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Directions at DeltaR ``r`` from (eta, phi), at a uniform angle."""
    a = rng.uniform(-math.pi, math.pi, len(r))
    return np.clip(eta + r * np.cos(a), -JET_ETA_MAX, JET_ETA_MAX), wrap(phi + r * np.sin(a))


def _parts(
    event: np.ndarray, pt: np.ndarray, eta: np.ndarray, phi: np.ndarray, flavour: np.ndarray | int
) -> list[np.ndarray]:
    return [event, pt, eta, phi, np.broadcast_to(np.asarray(flavour), event.shape).astype(np.int8)]


def _tt(rng: np.random.Generator, idx: np.ndarray, lepton: np.ndarray) -> list[list[np.ndarray]]:
    m = len(idx)
    _, lep_eta, lep_phi = pt_eta_phi(lepton)
    b_eta, b_phi = _around(rng, lep_eta, lep_phi, 0.5 + rng.gamma(2.0, 0.2, m))
    out = [_parts(idx, 25.0 + rng.exponential(40.0, m), b_eta, b_phi, BOTTOM)]
    top_eta = rng.normal(0.0, 1.0, m)
    top_phi = wrap(lep_phi + math.pi + rng.normal(0.0, 0.8, m))
    for scale, floor, flavour in ((45.0, 25.0, BOTTOM), (40.0, 20.0, LIGHT), (25.0, 15.0, LIGHT)):
        eta, phi = _around(rng, top_eta, top_phi, 0.4 + rng.exponential(0.6, m))
        out.append(_parts(idx, floor + rng.exponential(scale, m), eta, phi, flavour))
    out.append(_radiation(rng, np.repeat(idx, rng.poisson(0.5, m)), 20.0, 20.0))
    return out


def _radiation(rng: np.random.Generator, event: np.ndarray, floor: float, scale: float) -> list[np.ndarray]:
    k = len(event)
    eta = np.clip(rng.normal(0.0, 1.6, k), -JET_ETA_MAX, JET_ETA_MAX)
    return _parts(event, floor + rng.exponential(scale, k), eta, rng.uniform(-math.pi, math.pi, k), GLUON)


def _wjets(rng: np.random.Generator, idx: np.ndarray, w_phi: np.ndarray) -> list[list[np.ndarray]]:
    m = len(idx)
    u = rng.random(m)
    flavour = np.select([u < 0.05, u < 0.17, u < 0.80], [BOTTOM, CHARM, LIGHT], GLUON)
    eta = np.clip(rng.normal(0.0, 1.4, m), -JET_ETA_MAX, JET_ETA_MAX)
    phi = wrap(w_phi + math.pi + rng.normal(0.0, 0.4, m))
    out = [_parts(idx, 25.0 + rng.exponential(30.0, m), eta, phi, flavour)]
    bb = idx[flavour == BOTTOM]  # W+bb: the second b next to the first
    if len(bb):
        b_eta, b_phi = _around(rng, eta[flavour == BOTTOM], phi[flavour == BOTTOM], 0.5 + rng.exponential(0.8, len(bb)))
        out.append(_parts(bb, 20.0 + rng.exponential(25.0, len(bb)), b_eta, b_phi, BOTTOM))
    out.append(_radiation(rng, np.repeat(idx, rng.poisson(1.1, m)), 20.0, 25.0))
    return out


def _qcd(
    rng: np.random.Generator, idx: np.ndarray
) -> tuple[list[list[np.ndarray]], np.ndarray, np.ndarray, np.ndarray]:
    m = len(idx)
    heavy = np.where(rng.random(m) < 0.6, BOTTOM, CHARM)
    eta0 = rng.normal(0.0, 1.0, m).clip(-1.8, 1.8)
    phi0 = rng.uniform(-math.pi, math.pi, m)
    pt0 = 25.0 + rng.exponential(35.0, m)
    eta1 = np.clip(rng.normal(0.0, 1.4, m), -JET_ETA_MAX, JET_ETA_MAX)
    phi1 = wrap(phi0 + math.pi + rng.normal(0.0, 0.3, m))
    away = np.where(rng.random(m) < 0.6, GLUON, LIGHT)
    out = [
        _parts(idx, pt0, eta0, phi0, heavy),
        _parts(idx, pt0 * rng.uniform(0.6, 1.0, m), eta1, phi1, away),
        _radiation(rng, np.repeat(idx, rng.poisson(1.0, m)), 20.0, 20.0),
    ]
    # the lepton of the heavy-flavour decay, inside the leading jet, with a soft neutrino
    pt = LEPTON_PT_MIN + 0.5 + rng.exponential(9.0, m)
    lep_eta, lep_phi = _around(rng, eta0, phi0, rng.uniform(0.02, 0.35, m))
    lepton = momentum(pt, lep_eta, lep_phi)
    nu = rng.exponential(4.0, m)
    neutrino = np.stack([nu * np.cos(lep_phi), nu * np.sin(lep_phi)], axis=1)
    flight = rng.exponential(np.where(heavy == BOTTOM, 0.3, 0.2))
    return out, lepton, flight, neutrino


def hard_process(rng: np.random.Generator, label: np.ndarray) -> HardProcess:
    """Lepton, neutrino and partons of every event, by class."""
    n = len(label)
    lepton, neutrino, flight = np.zeros((n, 3)), np.zeros((n, 2)), np.zeros(n)
    pieces: list[list[np.ndarray]] = []
    tt = np.flatnonzero(label == TT)
    lepton[tt], neutrino[tt], _ = _accepted_w_leptons(rng, len(tt), 55.0, 0.9)
    pieces += _tt(rng, tt, lepton[tt])
    wj = np.flatnonzero(label == WJETS)
    lepton[wj], neutrino[wj], w_phi = _accepted_w_leptons(rng, len(wj), 25.0, 1.3)
    pieces += _wjets(rng, wj, w_phi)
    qcd = np.flatnonzero(label == QCD)
    qcd_pieces, lepton[qcd], flight[qcd], neutrino[qcd] = _qcd(rng, qcd)
    pieces += qcd_pieces
    columns = [np.concatenate([p[i] for p in pieces]) for i in range(5)]
    order = np.argsort(columns[0], kind="stable")
    event, pt, eta, phi, flavour = (c[order] for c in columns)
    return HardProcess(lepton, flight, neutrino, Partons(event.astype(np.int64), pt, eta, phi, flavour))
