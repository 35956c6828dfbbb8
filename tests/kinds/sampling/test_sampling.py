"""undersample, split and sample on real Spark and real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_and_run, manifest, parquet_table, spec_reading, write_spec

pytestmark = pytest.mark.spark


def test_sample_is_exact_and_nested_sizes_nest(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 5000)
    spec = spec_reading(
        tmp_path / "p",
        data,
        """
        one: {kind: sample, inputs: {data: raw}, params: {n: 1234, seed: 5}}
        nested: {kind: sample, inputs: {data: raw}, params: {sizes: [10, 300, 3000], seed: 5}}
        indep: {kind: sample, inputs: {data: raw}, params: {sizes: [10, 300], nested: false, seed: 5}}
        """,
    )
    plan = load_and_run(spark, spec)
    assert manifest(plan["one"])["rows"] == {"data": 1234}
    assert manifest(plan["nested"])["rows"] == {"n10": 10, "n300": 300, "n3000": 3000}
    ids = {
        name: {r.id for r in spark.read.parquet(plan["nested"].output_path(name)).select("id").collect()}
        for name in ("n10", "n300", "n3000")
    }
    assert ids["n10"] < ids["n300"] < ids["n3000"]
    wider = spec_reading(
        tmp_path / "p2",
        data,
        """
        nested: {kind: sample, inputs: {data: raw}, params: {sizes: [10, 300, 4500], seed: 5}}
        """,
    )
    widened = load_and_run(spark, wider)["nested"]
    for name in ("n10", "n300"):  # a larger size added: the smaller samples stay the same rows
        assert {r.id for r in spark.read.parquet(widened.output_path(name)).select("id").collect()} == ids[name]
    assert manifest(plan["indep"])["rows"] == {"n10": 10, "n300": 300}
    one = spark.read.parquet(plan["one"].output_path("data"))
    assert one.select("id").distinct().count() == 1234  # no row twice


def test_sample_refuses_more_rows_than_the_input_has_and_an_unknown_key(spark, home, tmp_path: Path) -> None:
    from dagspec.errors import StageFailedError

    data = parquet_table(spark, tmp_path, 50)
    spec = spec_reading(
        tmp_path / "p",
        data,
        """
        big: {kind: sample, inputs: {data: raw}, params: {n: 51}}
        """,
    )
    with pytest.raises(StageFailedError, match="asked 51, have 50"):
        load_and_run(spark, spec)
    keyed = spec_reading(
        tmp_path / "q",
        data,
        """
        some: {kind: sample, inputs: {data: raw}, params: {n: 5, key: [event]}}
        """,
    )
    with pytest.raises(
        StageFailedError, match=r"key column\(s\) \['event'\] not in the input; columns: \['id', 'label'\]"
    ):
        load_and_run(spark, keyed)


def test_undersample_to_minority_and_to_explicit_counts(spark, home, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 4000, {0: 0.056, 1: 0.56, 2: 0.384})
    spec = spec_reading(
        tmp_path / "p",
        data,
        """
        minority: {kind: undersample, inputs: {data: raw}, params: {seed: 1}}
        explicit: {kind: undersample, inputs: {data: raw}, params: {target_counts: {"1": 100, "2": 50}}}
        """,
    )
    plan = load_and_run(spark, spec)
    before = manifest(plan["minority"])["metrics"]["class_counts_before"]
    minority = min(before.values())
    counts = {
        r["label"]: r["count"]
        for r in spark.read.parquet(plan["minority"].output_path("data")).groupBy("label").count().collect()
    }
    assert counts == {0: minority, 1: minority, 2: minority}
    explicit = {
        r["label"]: r["count"]
        for r in spark.read.parquet(plan["explicit"].output_path("data")).groupBy("label").count().collect()
    }
    assert explicit == {1: 100, 2: 50}


def test_undersample_a_boolean_label(spark, home, tmp_path: Path) -> None:
    # the class keys and the samplers' groups agree on Spark's string cast ("true", not Python's "True")
    from pyspark.sql import functions as F

    data = tmp_path / "flags"
    spark.range(0, 600).select("id", (F.col("id") % 5 == 0).alias("label")).write.parquet(str(data))
    spec = spec_reading(tmp_path / "p", data, "balanced: {kind: undersample, inputs: {data: raw}, params: {seed: 2}}")
    plan = load_and_run(spark, spec)
    assert manifest(plan["balanced"])["metrics"]["class_counts_before"] == {"true": 120, "false": 480}
    rows = spark.read.parquet(plan["balanced"].output_path("data"))
    assert {r["label"]: r["count"] for r in rows.groupBy("label").count().collect()} == {True: 120, False: 120}


def test_the_draw_depends_on_the_rows_not_on_how_the_files_split_them(spark, home, tmp_path: Path) -> None:
    """The same rows as one file or as seven in another order: the same rows drawn by every kind."""
    from pyspark.sql import functions as F

    source = spark.read.parquet(str(parquet_table(spark, tmp_path, 3000, {0: 0.1, 1: 0.6, 2: 0.3})))
    source = source.withColumn("values", F.array(F.col("id") * 0.5, F.col("id") % 7))
    layouts = {"one_file": source.coalesce(1), "seven_files": source.orderBy(F.desc("id")).repartition(7)}
    drawn: dict[str, dict[str, set[int]]] = {}
    for layout, frame in layouts.items():
        frame.write.parquet(str(tmp_path / layout))
        spec = write_spec(
            tmp_path / f"p_{layout}",
            f"""
            stages:
              raw: {{kind: read, params: {{format: parquet, path: "{tmp_path / layout}"}}}}
              balanced: {{kind: undersample, inputs: {{data: raw}}, params: {{seed: 3}}}}
              parts: {{kind: split, inputs: {{data: raw}}, params: {{fractions: {{train: 0.8, test: 0.2}}, seed: 3}}}}
              some: {{kind: sample, inputs: {{data: raw}}, params: {{n: 700, seed: 3}}}}
              after: {{kind: split, inputs: {{data: balanced}}, params: {{fractions: {{a: 0.8, b: 0.2}}, seed: 3}}}}
              again: {{kind: split, inputs: {{data: parts.train}}, params: {{fractions: {{a: 0.8, b: 0.2}}, seed: 3}}}}
            """,
        )
        plan = load_and_run(spark, spec)
        outputs = {"balanced": ("balanced", "data"), "train": ("parts", "train"), "test": ("parts", "test")}
        outputs |= {"some": ("some", "data"), "after_b": ("after", "b"), "again_b": ("again", "b")}
        drawn[layout] = {
            name: {r.id for r in spark.read.parquet(plan[stage].output_path(port)).select("id").collect()}
            for name, (stage, port) in outputs.items()
        }
    assert drawn["one_file"] == drawn["seven_files"]
    split = drawn["one_file"]
    assert not split["train"] & split["test"] and len(split["train"] | split["test"]) == 3000
    assert 0.75 < len(split["train"]) / 3000 < 0.85
    assert len(split["some"]) == 700
    # the same seed downstream draws anew: a split of the undersampled rows, or of a split's output
    assert 0.14 < len(split["after_b"]) / len(split["balanced"]) < 0.26
    assert 0.16 < len(split["again_b"]) / len(split["train"]) < 0.24


def test_exact_thresholds_found_by_buckets_keep_the_lowest_ranked_rows_ties_included(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small buckets and fetches force several counting passes, on ranks and then on row ids (identical rows)."""
    from collections import Counter

    from pyspark.sql import functions as F

    from dagspec.kinds.sampling import exact
    from dagspec.kinds.sampling.row_hash import row_hash

    monkeypatch.setattr(exact, "BUCKET_BITS", 8)
    monkeypatch.setattr(exact, "FETCHED", 5)
    source = spark.range(3000).select(
        F.when(F.col("id") % 3 == 0, "a").when(F.col("id") % 3 == 1, "b").otherwise("c").alias("cls"),
        # class a: 400 identical rows (one rank), then distinct ones
        F.when((F.col("id") % 3 == 0) & (F.col("id") < 1200), F.lit(-1)).otherwise(F.col("id")).alias("v"),
    )
    source.repartition(3).write.parquet(str(tmp_path / "t"))
    df = spark.read.parquet(str(tmp_path / "t"))
    ranked = df.select("cls", "v", row_hash(df, 7, "salt").alias("r"), F.monotonically_increasing_id().alias("i"))
    rows = sorted((r.cls, r.r, r.i, r.v) for r in ranked.collect())
    in_a = [row for row in rows if row[0] == "a"]
    block = next(k for k, row in enumerate(in_a) if row[3] == -1)
    quotas = {"a": block + 200, "b": 17, "c": 0}  # the threshold falls inside the identical rows
    got = Counter(tuple(r) for r in exact.take_exact(df, quotas, 7, "salt", class_col="cls").collect())

    expected: Counter[tuple[str, int]] = Counter()
    for cls, quota in quotas.items():
        expected.update((c, v) for c, _, _, v in [row for row in rows if row[0] == cls][:quota])
    assert got == expected and sum(got.values()) == block + 217 and got[("a", -1)] == 200

    # read once: the rows below 6-sigma bounds are kept and give the same rows; bounds that do not
    # hold a quota (as identical rows above a bound would) make both passes run instead
    kept: list[object] = []

    def persist(frame):  # type: ignore[no-untyped-def]
        kept.append(frame)
        return frame.persist()

    monkeypatch.setattr(exact, "SUPERSET_MAX", 1.0)
    for quotas_now in (quotas, {"a": 5, "b": 17, "c": 1}):
        again = exact.take_exact(df, quotas_now, 7, "salt", class_col="cls", persist=persist)
        want: Counter[tuple[str, int]] = Counter()
        for cls, quota in quotas_now.items():
            want.update((c, v) for c, _, _, v in [row for row in rows if row[0] == cls][:quota])
        assert Counter(tuple(r) for r in again.collect()) == want
    assert len(kept) == 2
    monkeypatch.setattr(exact, "_bounds", lambda quotas, totals: {c: -(2**63) + 1 for c in quotas})
    fallback = exact.take_exact(df, quotas, 7, "salt", class_col="cls", persist=persist)
    assert Counter(tuple(r) for r in fallback.collect()) == expected and len(kept) == 3


def test_a_sample_drawn_in_one_pass_is_the_exact_paths_rows_and_falls_back_when_short(
    spark, home, tmp_path: Path
) -> None:
    """One size: Spark's top-k of the rows below a bound. 1500 identical rows share one rank: with a
    seed that puts it above the bound, the pass holds too few rows and the runtime writes the exact
    plan instead; either way the rows are ``take_exact``'s."""
    from collections import Counter

    from pyspark.sql import functions as F

    from dagspec.kinds.sampling import exact
    from dagspec.kinds.sampling.row_hash import row_hash

    source = spark.range(2000).select(F.when(F.col("id") < 1500, F.lit(-1)).otherwise(F.col("id")).alias("v"))
    source.repartition(4).write.parquet(str(tmp_path / "t"))
    df = spark.read.parquet(str(tmp_path / "t"))
    bounds = exact._bounds({"": 300}, {"": 2000})
    assert bounds is not None and bounds[""] is not None

    def identical_row_below_bound(seed: int) -> bool:
        rank = spark.range(1).select(F.lit(-1).cast("bigint").alias("v")).select(row_hash(df, seed, "some"))
        return bool(rank.first()[0] < bounds[""])

    seeds = {below: next(s for s in range(100) if identical_row_below_bound(s) == below) for below in (True, False)}
    for below, seed in seeds.items():
        spec = spec_reading(
            tmp_path / f"p{seed}",
            tmp_path / "t",
            f"some: {{kind: sample, inputs: {{data: raw}}, params: {{n: 300, seed: {seed}}}}}",
        )
        stage = load_and_run(spark, spec)["some"]
        got = Counter(r.v for r in spark.read.parquet(stage.output_path("data")).collect())
        want = Counter(r.v for r in exact.take_exact(df, {"": 300}, seed, "some").collect())
        assert got == want and sum(got.values()) == 300
        rewritten = manifest(stage)["metrics"].get("rewritten")
        if below:  # the identical rows are in the pass: it holds the sample
            assert rewritten is None and got[-1] > 0
        else:  # 500 distinct rows, about a fifth of them below the bound: short, written again
            assert rewritten == {"data": {"rows_first": rewritten["data"]["rows_first"], "expected": 300}}
            assert 0 < rewritten["data"]["rows_first"] < 300


def test_undersample_in_one_pass_keeps_the_exact_paths_rows_and_falls_back_when_short(
    spark, home, tmp_path: Path
) -> None:
    """Classes numbered in a window below their bounds: ``take_exact``'s rows; a class whose 900
    identical rows lie above its bound leaves the pass short and the exact plan is written instead."""
    from collections import Counter

    from pyspark.sql import functions as F

    from dagspec.kinds.sampling import exact
    from dagspec.kinds.sampling.row_hash import row_hash

    # class 1: 900 identical rows and 300 others; class 0: 200 rows (the minority)
    source = spark.range(1400).select(
        F.when(F.col("id") < 1200, 1).otherwise(0).alias("label"),
        F.when(F.col("id") < 900, F.lit(-1)).otherwise(F.col("id")).alias("v"),
    )
    source.repartition(3).write.parquet(str(tmp_path / "t"))
    df = spark.read.parquet(str(tmp_path / "t"))
    bounds = exact._bounds({"0": 200, "1": 200}, {"0": 200, "1": 1200})
    assert bounds is not None and bounds["1"] is not None

    def identical_rows_below_bound(seed: int) -> bool:
        one = spark.range(1).select(F.lit(1).alias("label"), F.lit(-1).cast("bigint").alias("v"))
        return bool(one.select(row_hash(df, seed, "bal")).first()[0] < bounds["1"])

    for below in (True, False):
        seed = next(s for s in range(100) if identical_rows_below_bound(s) == below)
        params = f"{{seed: {seed}}}"
        spec = spec_reading(
            tmp_path / f"p{seed}",
            tmp_path / "t",
            f"bal: {{kind: undersample, inputs: {{data: raw}}, params: {params}}}",
        )
        stage = load_and_run(spark, spec)["bal"]
        got = Counter(tuple(r) for r in spark.read.parquet(stage.output_path("data")).collect())
        want = Counter(tuple(r) for r in exact.take_exact(df, {"0": 200, "1": 200}, seed, "bal", "label").collect())
        assert got == want and sum(got.values()) == 400
        rewritten = manifest(stage)["metrics"].get("rewritten")
        assert (rewritten is None) == below, rewritten
