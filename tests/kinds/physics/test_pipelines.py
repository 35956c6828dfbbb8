"""The shipped physics specs, run in-process on the real ROOT files, and the generator kind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from tests.conftest import REPO
from tests.helpers import load_and_run, manifest, write_spec

pytestmark = pytest.mark.spark


def test_hep_zz_features_spec_selects_isolated_leptons(spark: SparkSession, home: Path, tmp_path: Path) -> None:
    plan = load_and_run(spark, REPO / "pipelines" / "hep_zz_features.yaml")
    assert manifest(plan["events"])["rows"] == {"data": 2421}
    selection = manifest(plan["particles"])["metrics"]
    assert selection["events_in"] == 2421
    assert selection["events_selected"] + selection["events_rejected"] == 2421
    assert 0 < selection["events_rejected"] < 2421
    out = spark.read.parquet(str(tmp_path / "storage" / "exports" / "out" / "hep_zz_features"))
    assert out.count() == selection["events_selected"]
    assert {"hfeatures", "lfeatures", "label", "NPrimaryVertices", "EventWeight", "HLF_input", "GRU_input"} <= set(
        out.columns
    )
    rows = out.select("hfeatures", "lfeatures", "label", "GRU_input", "encoded_label").limit(200).collect()
    for row in rows:
        lepton = row.lfeatures[0]
        assert row.hfeatures[6] == pytest.approx(lepton[4]) and lepton[4] > 23.0  # LepPt, particle 0
        assert row.hfeatures[9] + row.hfeatures[10] + row.hfeatures[11] < 0.45  # relative isolation
        assert lepton[16] + lepton[17] == 1.0  # electron or muon
        assert lepton[4] == pytest.approx(np.hypot(lepton[1], lepton[2]))
        assert row.label == 1 and row.encoded_label == [0.0, 1.0]
        assert len(row.GRU_input) == 20
    assert out.agg(F.max(F.col("hfeatures")[5])).first()[0] >= 1  # some b-tagged jets


def test_hep_run2012_rntuple_spec(spark: SparkSession, home: Path, tmp_path: Path) -> None:
    plan = load_and_run(spark, REPO / "pipelines" / "hep_run2012_features.yaml")
    assert manifest(plan["events"])["rows"] == {"data": 1000}
    selected = manifest(plan["particles"])["metrics"]["events_selected"]
    out = spark.read.parquet(str(tmp_path / "storage" / "exports" / "out" / "hep_run2012_features"))
    assert 0 < out.count() == selected < 1000
    rows = out.select("hfeatures", "lfeatures").collect()
    assert any(len(r.lfeatures) >= 2 for r in rows)
    for r in rows:
        assert r.lfeatures[0][4] == max(p[4] for p in r.lfeatures) > 23.0  # the leading muon first
        assert r.hfeatures[0:6] == [0.0] * 6  # no jets, no MET in this file


def test_generated_events_are_physical_deterministic_and_partition_independent(
    spark: SparkSession, home: Path, tmp_path: Path
) -> None:
    spec = write_spec(
        tmp_path / "pipelines",
        """
        stages:
          one: {kind: generate_physics_events, params: {events: 1300, seed: 5, partitions: 1, max_particles: 120}}
          two: {kind: generate_physics_events, params: {events: 1300, seed: 5, partitions: 2, max_particles: 120}}
          other: {kind: generate_physics_events, params: {events: 1300, seed: 6, max_particles: 120}}
        """,
    )
    plan = load_and_run(spark, spec)
    frames = {name: spark.read.parquet(plan[name].output_path("data")) for name in ("one", "two", "other")}

    def digest(df: DataFrame) -> Row | None:  # an order-independent content hash
        return df.agg(
            F.count("*"), F.sum(F.xxhash64("event_id", "hfeatures", "lfeatures", "label").cast("decimal(38,0)"))
        ).first()

    assert digest(frames["one"]) == digest(frames["two"])
    assert digest(frames["one"]) != digest(frames["other"])
    rows = frames["one"].collect()
    assert sorted(r.event_id for r in rows) == list(range(1300))
    labels = np.bincount([r.label for r in rows], minlength=3) / 1300
    assert np.allclose(labels, [0.056, 0.560, 0.384], atol=0.04)
    counts = np.array([len(r.lfeatures) for r in rows])
    assert counts.max() <= 120 and len(set(counts)) > 20
    x = np.concatenate([np.array(r.lfeatures) for r in rows])
    assert x.shape[1] == 19
    np.testing.assert_allclose(x[:, 4], np.hypot(x[:, 1], x[:, 2]), rtol=1e-12)
    p = np.sqrt((x[:, 1:4] ** 2).sum(axis=1))
    assert (x[:, 0] >= p * (1 - 1e-12)).all()
    np.testing.assert_allclose(x[:, 5], np.arcsinh(x[:, 3] / x[:, 4]), atol=1e-9)
    assert (np.abs(x[:, 6]) <= np.pi).all()
    assert (x[:, 13:18].sum(axis=1) == 1).all()
    assert set(np.unique(x[:, 18])) <= {-1.0, 0.0, 1.0}
    h = np.array([r.hfeatures for r in rows])
    lab = np.array([r.label for r in rows])
    first = np.array([r.lfeatures[0] for r in rows])
    assert (first[:, 16] + first[:, 17] == 1).all() and (first[:, 4] > 23.0).all()
    np.testing.assert_allclose(h[:, 6], first[:, 4])
    # the classes differ the way the physics does: tt has more jets and b jets, W+jets a larger MT than QCD
    assert h[lab == 1, 4].mean() > h[lab == 2, 4].mean() + 1
    assert h[lab == 1, 5].mean() > h[lab == 2, 5].mean()
    assert h[lab == 2, 3].mean() > h[lab == 0, 3].mean() + 20
