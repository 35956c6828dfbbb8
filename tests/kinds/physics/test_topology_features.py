"""topology_features against a direct port of the seed's UDF and against Spark ML's scalers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import DataFrame, SparkSession

from dagspec.errors import StageFailedError
from dagspec.kinds.class_names import label_class_names
from dagspec.kinds.physics.topology import fix_length, prepare_particles
from dagspec.kinds.physics.topology_features import TopologyFeaturesParams, add_topology_features

pytestmark = pytest.mark.spark


def _seed_delta_phi(phi1: float, phi2: float) -> float:
    dphi = phi1 - phi2
    while dphi > math.pi:
        dphi -= 2 * math.pi
    while dphi < -math.pi:
        dphi += 2 * math.pi
    return dphi


def seed_transform(particles: list[list[float]]) -> list[list[float]]:
    """The seed's UDF body: sort by DeltaR to particle 0 (reverse, stable), then StandardScaler."""
    from sklearn.preprocessing import StandardScaler

    lepton = particles[0]

    def delta_r(p: list[float]) -> float:
        return math.sqrt((p[5] - lepton[5]) ** 2 + _seed_delta_phi(p[6], lepton[6]) ** 2)

    particles = list(particles)
    particles.sort(key=delta_r, reverse=True)
    return StandardScaler().fit_transform(particles).tolist()


def random_events(n: int, seed: int) -> list[np.ndarray]:
    """Random events, every sixth kind degenerate: one particle, identical particles, zero tails."""
    rng = np.random.default_rng(seed)
    events = []
    for i in range(n):
        count = int(rng.integers(1, 40))
        x = rng.normal(size=(count, 19)) * rng.choice([1.0, 80.0], size=19)
        x[:, 6] = rng.uniform(-math.pi, math.pi, count)
        kind = i % 6
        if kind == 1:
            x = x[:1]
        elif kind == 2:
            x = np.repeat(x[:1], count, axis=0)
        elif kind == 3:
            x[count // 2 :] = 0.0  # zero-padded tail: many exact DeltaR ties
        elif kind == 4:
            x[:, 13:18] = 0.0
            x[:, 13] = 1.0  # a feature constant within the event
        elif kind == 5:
            x[1::2] = x[0]  # particles identical to the lepton (DeltaR 0 ties)
        events.append(x)
    return events


@pytest.mark.parametrize("longest", [0, 600], ids=["per-event-table", "lexsort-for-one-long-event"])
def test_numpy_core_matches_the_seed_udf_on_degenerate_events(longest: int) -> None:
    events = random_events(300, seed=1)
    if longest:  # one event far above the mean: the sort takes its other path
        rng = np.random.default_rng(2)
        long_event = rng.normal(size=(longest, 19))
        long_event[longest // 3 :] = 0.0
        events.insert(150, long_event)
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in events])])
    _, out = prepare_particles(offsets, np.concatenate(events))
    for i, event in enumerate(events):
        expected = np.array(seed_transform(event.tolist()))
        np.testing.assert_allclose(out[offsets[i] : offsets[i + 1]], expected, rtol=0, atol=1e-9)


def test_fix_length_pads_with_zeros_and_keeps_the_nearest_or_farthest() -> None:
    offsets = np.array([0, 3, 4])
    x = np.arange(4 * 2, dtype=np.float64).reshape(4, 2) + 1
    new_offsets, nearest = fix_length(offsets, x, 2, "nearest")
    assert new_offsets.tolist() == [0, 2, 4]
    assert nearest.tolist() == [[3, 4], [5, 6], [7, 8], [0, 0]]
    _, farthest = fix_length(offsets, x, 2, "farthest")
    assert farthest.tolist() == [[1, 2], [3, 4], [7, 8], [0, 0]]


def _events_frame(spark: SparkSession, tmp_path: Path, events: list[np.ndarray], seed: int = 3) -> DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, event in enumerate(events):
        hlf = rng.normal(size=14).tolist()
        hlf[4] = 2.0  # a constant HLF column: MinMaxScaler gives 0.5
        rows.append((i, hlf, event.tolist(), int(rng.integers(0, 3))))
    path = str(tmp_path / "events.parquet")
    spark.createDataFrame(
        rows, "event_id long, hfeatures array<double>, lfeatures array<array<double>>, label int"
    ).write.parquet(path)
    return spark.read.parquet(path)


def test_topology_features_matches_the_seed_udf_and_spark_ml(spark, tmp_path: Path) -> None:
    from pyspark.ml.feature import MinMaxScaler, OneHotEncoder
    from pyspark.ml.functions import array_to_vector, vector_to_array
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = _events_frame(spark, tmp_path, random_events(240, seed=2))
    metrics: dict = {}
    ours = add_topology_features(df, TopologyFeaturesParams(), metrics)
    assert ours.columns == ["event_id", "hfeatures", "lfeatures", "label", "HLF_input", "encoded_label", "GRU_input"]
    assert metrics["rows"] == 240 and metrics["num_classes"] == 3

    # the seed, as it ran: a row-at-a-time Python UDF (useArrow=False: SPARK-58241 hangs otherwise)
    seed_udf = F.udf(seed_transform, T.ArrayType(T.ArrayType(T.DoubleType())), useArrow=False)
    vectors = df.withColumn("hvec", array_to_vector("hfeatures"))
    scaled = MinMaxScaler(inputCol="hvec", outputCol="hscaled").fit(vectors).transform(vectors)
    encoded = OneHotEncoder(inputCol="label", outputCol="onehot", dropLast=False).fit(scaled).transform(scaled)
    reference = encoded.select(
        "event_id",
        vector_to_array("hscaled").alias("hlf"),
        vector_to_array("onehot").alias("onehot"),
        seed_udf("lfeatures").alias("gru"),
    )
    expected = {r.event_id: r for r in reference.collect()}
    inputs = {r.event_id: r.lfeatures for r in df.select("event_id", "lfeatures").collect()}
    got = ours.collect()
    assert len(got) == len(expected) == 240
    worst = 0.0
    for row in got:
        ref = expected[row.event_id]
        assert row.encoded_label == ref.onehot
        np.testing.assert_allclose(row.HLF_input, ref.hlf, rtol=0, atol=1e-12)
        assert row.HLF_input[4] == 0.5
        assert np.shape(row.GRU_input) == np.shape(ref.gru)
        worst = max(worst, float(np.max(np.abs(np.array(row.GRU_input) - np.array(ref.gru)))))
        assert row.lfeatures == inputs[row.event_id]  # input columns pass through untouched
    assert worst < 1e-9


def test_the_label_columns_name_their_classes_through_parquet_and_filters(spark, tmp_path: Path) -> None:
    df = _events_frame(spark, tmp_path, random_events(60, seed=3))
    written = tmp_path / "features"
    add_topology_features(df, TopologyFeaturesParams(keep_raw=False)).write.parquet(str(written))
    # what undersample and split do to it downstream: read, filter, select
    downstream = spark.read.parquet(str(written)).where("event_id % 2 = 0").select("label", "encoded_label")
    for column in ("label", "encoded_label"):
        assert label_class_names(downstream.schema[column].metadata) == ["QCD", "tt", "W+jets"]
    four = add_topology_features(df, TopologyFeaturesParams(num_classes=4))
    assert label_class_names(four.schema["encoded_label"].metadata) is None  # three names do not name four classes


def test_topology_features_pads_accepts_vectors_and_rejects_bad_input(spark, tmp_path: Path) -> None:
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    df = _events_frame(spark, tmp_path, random_events(30, seed=4))
    as_vector = df.withColumn("hfeatures", array_to_vector("hfeatures"))
    fixed = add_topology_features(as_vector, TopologyFeaturesParams(max_particles=8, num_classes=4))
    assert fixed.columns[:4] == ["event_id", "hfeatures", "lfeatures", "label"]
    sizes = fixed.select(F.size("GRU_input").alias("n"), F.size("encoded_label").alias("k")).distinct().collect()
    assert [(r.n, r.k) for r in sizes] == [(8, 4)]
    one = fixed.where(F.size("lfeatures") == 1).first()
    assert one is not None and one.GRU_input[1:] == [[0.0] * 19] * 7
    lean = add_topology_features(as_vector, TopologyFeaturesParams(max_particles=8, num_classes=4, keep_raw=False))
    assert lean.columns == ["event_id", "label", "HLF_input", "encoded_label", "GRU_input"]
    by_id = {r.event_id: r.GRU_input for r in fixed.select("event_id", "GRU_input").collect()}
    assert {r.event_id: r.GRU_input for r in lean.select("event_id", "GRU_input").collect()} == by_id

    with pytest.raises(StageFailedError, match="must hold 15 values"):
        add_topology_features(df, TopologyFeaturesParams(hlf_size=15))
    with pytest.raises(StageFailedError, match="does not fit num_classes=2"):
        add_topology_features(df, TopologyFeaturesParams(num_classes=2))
    with pytest.raises(StageFailedError, match="no column"):
        add_topology_features(df.drop("label"), TopologyFeaturesParams())
