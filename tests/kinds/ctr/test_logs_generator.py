"""The log generator writes in one pass and caches nothing (caching 12.1M generated lines once ran
the Spark Connect server's 4g heap out: the 10^7-row scale run), and a value's effect is its own."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_the_generator_counts_its_rows_and_clicks_while_writing_and_caches_nothing(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    def refuse(self: object, *args: object) -> None:
        raise AssertionError("the generator cached its lines")

    frames = type(spark.range(1))  # the session's own DataFrame class (classic or Connect)
    monkeypatch.setattr(frames, "persist", refuse)
    monkeypatch.setattr(frames, "cache", refuse)
    out = tmp_path / "logs"
    stats = write_criteo_logs(spark, str(out), rows=3000, days=3, seed=5, base_ctr=0.25)
    files = sorted(out.glob("day_*.tsv"))
    assert [f.name for f in files] == ["day_00.tsv", "day_01.tsv", "day_02.tsv"]
    labels = [line.split("\t", 1)[0] for f in files for line in f.read_text().splitlines()]
    # the observed figures are the written file's: every row, and its click rate exactly
    assert stats["rows"] == len(labels) == 3000
    assert stats["ctr"] == pytest.approx(labels.count("1") / 3000)
    assert abs(stats["ctr"] - 0.25) < 0.05


def test_a_value_has_one_effect_on_every_line(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    # only C3's values carry the signal: the logit must then be a function of C3's value. A random
    # draw repeated inside `when` branches is a draw of its own that skips the rows the branch
    # skips, so a value and its effect came from different lines (the signal could not be learned)
    from pyspark.sql import functions as F

    from dagspec.kinds.ctr import logs_generator

    monkeypatch.setattr(logs_generator, "INTEGER_EFFECTS", {})
    monkeypatch.setattr(logs_generator, "INTERACTION_SCALE", 0.0)
    monkeypatch.setattr(logs_generator, "INT_WAVES", {})
    monkeypatch.setattr(logs_generator, "INT_SURFACES", [])
    monkeypatch.setattr(logs_generator, "cat_scale", lambda column: 1.0 if column == 2 else 0.0)
    frame = logs_generator.criteo_frame(spark, 4000, 2, seed=9)
    per_value = frame.groupBy("C3").agg(F.countDistinct("signal").alias("n"), F.count("*").alias("lines"))
    assert per_value.where("n > 1").count() == 0
    # and the values differ: the head (index 0) has no effect, the others one each
    assert frame.select(F.countDistinct("signal")).first()[0] > 20


def test_an_integer_wave_is_its_value_s_alone_and_out_of_a_linear_model_s_reach(
    spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the trees' part of the signal: a function of I2's value only, which a linear model in log1p(I2)
    # (what VW and LR see) cannot follow: nearly uncorrelated with it, yet of a real size
    import numpy as np
    from pyspark.sql import functions as F

    from dagspec.kinds.ctr import logs_generator

    monkeypatch.setattr(logs_generator, "INTEGER_EFFECTS", {})
    monkeypatch.setattr(logs_generator, "INTERACTION_SCALE", 0.0)
    monkeypatch.setattr(logs_generator, "INT_SURFACES", [])
    monkeypatch.setattr(logs_generator, "INT_WAVES", {1: (1.0, 1.0)})
    monkeypatch.setattr(logs_generator, "cat_scale", lambda column: 0.0)
    frame = logs_generator.criteo_frame(spark, 6000, 2, seed=11).where(F.col("I2").isNotNull())
    per_value = frame.groupBy("I2").agg(F.countDistinct("signal").alias("n"))
    assert per_value.where("n > 1").count() == 0
    rows = frame.select(F.log1p("I2").alias("x"), "signal").toPandas()
    assert rows["signal"].std() > 0.5
    assert abs(np.corrcoef(rows["x"], rows["signal"])[0, 1]) < 0.2
