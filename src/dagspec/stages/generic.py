"""The generic stage functions: read, sql, undersample, split, sample, export."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagspec.errors import StageFailedError
from dagspec.kinds.generic import ExportParams, ReadParams, SampleParams, SplitParams, SqlParams, UndersampleParams
from dagspec.plan import join_under, resolve_input_path
from dagspec.runtime import HadoopFS, StageContext
from dagspec.stages.schemas import named_schema

Inputs = Mapping[str, DataFrame | str]


def read(inputs: Inputs, params: ReadParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Read files into a table; criteo and root formats have readers of their own."""
    path = resolve_input_path(params.path, _home(ctx))
    if params.format == "criteo":
        from dagspec.stages.read_criteo import read_criteo

        return read_criteo(ctx.spark, path, params, ctx)
    if params.format == "root":
        from dagspec.stages.read_root import read_root

        return {"data": read_root(ctx.spark, path, params, ctx)}
    return {"data": read_table(ctx.spark, path, params)}


def read_table(spark: SparkSession, path: str, params: ReadParams) -> DataFrame:
    """parquet / csv / tsv / json through Spark's own readers."""
    reader = spark.read.options(**{k: str(v) for k, v in params.options.items()})
    if params.schema_:
        reader = reader.schema(named_schema(params.schema_) or params.schema_)
    if params.format == "parquet":
        return reader.parquet(path)
    if params.format == "json":
        return reader.json(path)
    delimiter = params.delimiter or ("\t" if params.format == "tsv" else ",")
    header = bool(params.header) if params.header is not None else False
    return reader.csv(path, sep=delimiter, header=header, inferSchema=params.schema_ is None)


def _home(ctx: StageContext):
    from pathlib import Path

    return Path(ctx.stage.home)


def sql(inputs: Inputs, params: SqlParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Run a query over the inputs, each registered as a temporary view named by its role."""
    for role, df in inputs.items():
        assert isinstance(df, DataFrame)
        df.createOrReplaceTempView(role)
    return {"data": ctx.spark.sql(params.query)}


def _class_counts(df: DataFrame, label_col: str) -> dict[str, int]:
    return {str(row[0]): int(row[1]) for row in df.groupBy(label_col).count().collect()}


def take_exact(df: DataFrame, quotas: Mapping[str, int], seed: int, class_col: str | None = None) -> DataFrame:
    """Exactly ``quotas[c]`` rows of each class ``c`` (or of the whole table under key ''), at random.

    Rows get a seeded random rank; the table is range-partitioned and sorted by (class, rank), so
    each partition holds a contiguous slice of every class's order. A tiny per-partition count
    table then gives each partition's offset, and a row is kept when offset + its position within
    the partition is below the quota. Exact, fully parallel, and nothing but counts reach the driver.
    """
    key = F.col(class_col).cast("string") if class_col else F.lit("")
    ranked = df.withColumn("__class", key).withColumn("__rank", F.rand(seed))
    n_partitions = max(1, ranked.rdd.getNumPartitions())
    ranked = (
        ranked.repartitionByRange(n_partitions, "__class", "__rank")
        .sortWithinPartitions("__class", "__rank")
        .withColumn("__pid", F.spark_partition_id())
        .withColumn("__mid", F.monotonically_increasing_id())
    )
    ranked = ranked.persist()
    counts = ranked.groupBy("__pid", "__class").agg(F.count("*").alias("n"), F.min("__mid").alias("first")).collect()
    offsets: dict[tuple[int, str], int] = {}
    running: dict[str, int] = {}
    for row in sorted(counts, key=lambda r: (r["__class"], r["__pid"])):
        offsets[(row["__pid"], row["__class"])] = running.get(row["__class"], 0) - row["first"]
        running[row["__class"]] = running.get(row["__class"], 0) + row["n"]
    missing = {c: (q, running.get(c, 0)) for c, q in quotas.items() if running.get(c, 0) < q}
    if missing:
        detail = ", ".join(f"{c or 'all rows'}: asked {q}, have {have}" for c, (q, have) in missing.items())
        ranked.unpersist()
        raise StageFailedError(f"not enough rows to sample exactly: {detail}")
    offset_map = F.create_map(
        *[e for (pid, c), off in offsets.items() for e in (F.lit(f"{pid}|{c}"), F.lit(off).cast("long"))]
    )
    quota_map = F.create_map(*[e for c, q in quotas.items() for e in (F.lit(c), F.lit(q).cast("long"))])
    position = F.col("__mid") + offset_map[F.concat_ws("|", F.col("__pid").cast("string"), F.col("__class"))]
    kept = ranked.where(position < F.coalesce(quota_map[F.col("__class")], F.lit(0)))
    return kept.drop("__class", "__rank", "__pid", "__mid")


def undersample(inputs: Inputs, params: UndersampleParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Exactly the minority count (or target_counts) of every class, seeded."""
    df = inputs["data"]
    assert isinstance(df, DataFrame)
    before = _class_counts(df, params.label_col)
    if params.target_counts is not None:
        unknown = sorted(set(params.target_counts) - set(before))
        if unknown:
            raise StageFailedError(f"target_counts names classes not in the data: {unknown}; classes: {sorted(before)}")
        quotas = dict(params.target_counts)
    else:
        minority = min(before.values())
        quotas = {c: minority for c in before}
    result = take_exact(df, quotas, params.seed, params.label_col)
    ctx.metrics["class_counts_before"] = before
    ctx.metrics["class_counts_after"] = {c: min(q, before.get(c, 0)) for c, q in quotas.items()}
    return {"data": result}


def split(inputs: Inputs, params: SplitParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Spark's randomSplit into named outputs; listed outputs are shuffled (seeded)."""
    df = inputs["data"]
    assert isinstance(df, DataFrame)
    names = list(params.fractions)
    parts = df.randomSplit([params.fractions[n] for n in names], seed=params.seed)
    result = {}
    for name, part in zip(names, parts, strict=True):
        result[name] = part.orderBy(F.rand(params.seed)) if name in params.shuffle else part
    return result


def sample(inputs: Inputs, params: SampleParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Exact-size random samples; nested sizes share one random order, independent ones do not."""
    df = inputs["data"]
    assert isinstance(df, DataFrame)
    sizes = params.output_sizes()
    result: dict[str, DataFrame] = {}
    if params.nested:
        largest = max(sizes.values())
        base = take_exact(df, {"": largest}, params.seed).persist()
        for name, size in sizes.items():
            # the same seed over the same base gives the same ranks, so smaller samples nest
            result[name] = take_exact(base, {"": size}, params.seed + 1) if size < largest else base
    else:
        for i, (name, size) in enumerate(sizes.items()):
            result[name] = take_exact(df, {"": size}, params.seed + i)
    ctx.metrics["sizes"] = sizes
    return result


def export(inputs: Inputs, params: ExportParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Write to ``storage.root/path``: into a temporary sibling, then swapped in by renames."""
    df = inputs["data"]
    assert isinstance(df, DataFrame)
    target = join_under(ctx.stage.storage_root, params.path)
    tmp = f"{target}.__tmp-{uuid.uuid4().hex[:8]}"
    if params.partitions:
        df = df.repartition(params.partitions)
    writer = df.write.mode("errorifexists")
    if params.format == "parquet":
        writer.parquet(tmp)
    elif params.format in ("libsvm", "vw"):
        from dagspec.stages.ctr_export import write_text_format

        write_text_format(df, tmp, params.format)
    else:
        writer.csv(tmp, header=params.header)
    fs = HadoopFS(ctx.spark, target)
    if fs.exists(target):
        old = f"{target}.__old-{uuid.uuid4().hex[:8]}"
        fs.rename(target, old)
        fs.rename(tmp, target)
        fs.delete(old)
    else:
        fs.rename(tmp, target)
    ctx.metrics["exported_to"] = target
    ctx.metrics["rows"] = ctx.spark.read.parquet(target).count() if params.format == "parquet" else None
    return {}
