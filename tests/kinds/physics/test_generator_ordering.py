"""The physics generator shows the paper's ordering: inclusive > particle GRU > HLF on tt, intervals apart.

The demo's chain at a CI size, in-process: ``generate_chunk`` (what the generating Spark tasks
run), the feature stage's own numpy functions (min-max scaling, DeltaR sort, per-event
standardization, truncation), the three Keras architectures ``train_keras`` builds, and the DeLong
intervals ``evaluate`` reports.
"""

from __future__ import annotations

import numpy as np
import pytest

from dagspec.kinds.physics.generator import CHUNK_EVENTS, Events, GeneratorConfig, generate_chunk
from dagspec.kinds.physics.topology import min_max_scale, prepare_particles
from dagspec.kinds.scoring.intervals import chunk_sums, delong, normal_interval

EVENTS, MAX_PARTICLES, EPOCHS = 12_000, 40, 8


def _auc_interval(score: np.ndarray, positive: np.ndarray) -> tuple[float, list[float]]:
    order = np.argsort(score, kind="stable")
    distinct, start = np.unique(score[order], return_index=True)
    pos = np.add.reduceat(positive[order].astype(np.float64), start)
    neg = np.add.reduceat((~positive[order]).astype(np.float64), start)
    result = delong(chunk_sums(pos, neg))
    assert result.auc is not None and len(distinct) == len(pos)
    interval = normal_interval(result.auc, result.variance, 0.95)
    assert interval is not None
    return result.auc, interval


def _events() -> list[Events]:
    config = GeneratorConfig(seed=42, max_particles=MAX_PARTICLES, class_fractions=(1 / 3, 1 / 3, 1 / 3))
    return [
        generate_chunk(config, i, i * CHUNK_EVENTS, min(CHUNK_EVENTS, EVENTS - i * CHUNK_EVENTS))
        for i in range(-(-EVENTS // CHUNK_EVENTS))
    ]


def test_particles_beat_the_hlf_and_both_together_beat_the_particles() -> None:
    import keras

    from dagspec.kinds.training.keras_inputs import InputSpec
    from dagspec.kinds.training.keras_models import build_model

    chunks = _events()
    hlf = np.concatenate([c.hfeatures for c in chunks])
    label = np.concatenate([c.label for c in chunks])
    hlf_input = min_max_scale(hlf, hlf.min(axis=0), hlf.max(axis=0)).astype(np.float32)
    gru_input = np.concatenate(
        [prepare_particles(c.offsets, c.particles, MAX_PARTICLES)[1].reshape(-1, MAX_PARTICLES, 19) for c in chunks]
    ).astype(np.float32)
    one_hot = np.eye(3, dtype=np.float32)[label]
    shuffled = np.random.default_rng(0).permutation(EVENTS)
    train, test = shuffled[: int(0.8 * EVENTS)], shuffled[int(0.8 * EVENTS) :]
    sequence = InputSpec("GRU_input", "sequence", (MAX_PARTICLES, 19))
    dense = InputSpec("HLF_input", "dense", (14,))

    def inputs(arch: str, rows: np.ndarray) -> object:
        if arch == "hlf_dense":
            return hlf_input[rows]
        if arch == "particle_gru":
            return gru_input[rows]
        return {"GRU_input": gru_input[rows], "HLF_input": hlf_input[rows]}

    found: dict[str, tuple[float, list[float]]] = {}
    for arch, specs, batch, rate in (
        ("hlf_dense", [dense], 128, 1e-3),  # the demo's settings (pipelines/topology_classifier.yaml)
        ("particle_gru", [sequence], 256, 2e-3),
        ("inclusive", [sequence, dense], 256, 2e-3),
    ):
        keras.utils.set_random_seed(42)
        model = build_model(arch, specs, 3)
        model.compile(keras.optimizers.Adam(rate), "categorical_crossentropy")
        model.fit(inputs(arch, train), one_hot[train], batch_size=batch, epochs=EPOCHS, verbose=0)
        scores = model.predict(inputs(arch, test), batch_size=1024, verbose=0)
        found[arch] = _auc_interval(scores[:, 1], label[test] == 1)  # tt against the rest
    (hlf_auc, hlf_ci), (gru_auc, gru_ci), (incl_auc, incl_ci) = (found[a] for a in found)
    summary = {arch: f"{auc:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]" for arch, (auc, ci) in found.items()}
    assert 0.95 <= hlf_auc <= 0.985, summary  # detector-level HLF: good, not perfect
    assert hlf_ci[1] < gru_ci[0], summary  # the particles carry what the HLF summarize badly
    assert gru_ci[1] < incl_ci[0], summary  # and the HLF what the nearest particles miss
    assert gru_auc < incl_auc


@pytest.mark.parametrize("max_particles", [1, 12])
def test_lfeatures_keep_the_lepton_and_the_particles_nearest_to_it(max_particles: int) -> None:
    full = generate_chunk(GeneratorConfig(seed=7, max_particles=801), 0, 0, 200)
    cut = generate_chunk(GeneratorConfig(seed=7, max_particles=max_particles), 0, 0, 200)
    np.testing.assert_array_equal(full.hfeatures, cut.hfeatures)  # the HLF come from the whole event
    counts = np.diff(cut.offsets)
    assert counts.max() == max_particles and counts.min() >= 1
    lepton = cut.particles[cut.offsets[:-1]]
    assert (lepton[:, 16] + lepton[:, 17] == 1).all()  # particle 0: an electron or a muon
    for e in range(0, 200, 37):
        rows = full.particles[full.offsets[e] : full.offsets[e + 1]]
        kept = cut.particles[cut.offsets[e] : cut.offsets[e + 1]]
        d_r = np.hypot(rows[1:, 5] - rows[0, 5], (rows[1:, 6] - rows[0, 6] + np.pi) % (2 * np.pi) - np.pi)
        kept_r = np.hypot(kept[1:, 5] - kept[0, 5], (kept[1:, 6] - kept[0, 6] + np.pi) % (2 * np.pi) - np.pi)
        assert len(kept_r) == min(max_particles - 1, len(d_r))
        if len(kept_r):
            assert kept_r.max() <= np.sort(d_r)[len(kept_r) - 1] + 1e-12
