"""The plain Spark twins of ``bench/data_kinds.py``: for each data kind, the code a user would write by hand.

A twin reads what the dagspec stage reads and writes what it writes (Parquet, text or CSV into its
own folder); it returns a counter, called after the timing, that gives its output's row counts
under the keys of the stage's (``rows``, ``rejected``, ``train``/``test``, ``fields``). What each
twin leaves out of the kind is in the docstring of ``data_kinds.py``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_INTEGER_COLUMNS, criteo_ddl

Counts = dict[str, int | None]
# the headered csv/tsv files read by `read` csv and tsv: 20 of the 40 Criteo columns
TEXT_COLUMNS = ["label", *CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS[:6]]
TEXT_DDL = ", ".join(
    f"{c} {'INT' if c == 'label' else 'BIGINT' if c.startswith('I') else 'STRING'}" for c in TEXT_COLUMNS
)
SEED = 42
SAMPLE_EVERY = 10  # sample: n = rows // 10
SPLIT = {"train": 0.8, "test": 0.2}
HASH_BITS = 17
EXPORT_PARTITIONS = 4


@dataclass(frozen=True)
class Job:
    """What a twin reads and where it writes: ``source`` is the stage's file or input checkpoint."""

    source: str
    out: Path
    rows: int


def sample_size(rows: int) -> int:
    """The ``n`` of the ``sample`` stage."""
    return max(1, rows // SAMPLE_EVERY)


def with_margin(keep: int, total: int) -> float:
    """A draw probability whose expected count is ``keep`` plus 6 standard deviations (a shortfall: ~1e-9)."""
    return min(1.0, (keep + 6 * math.sqrt(keep) + 10) / total)


def worker_cpu_seconds() -> float:
    """User + system CPU seconds of the processes under the Spark JVM (PySpark's daemon and Python
    workers, with the children they reaped); ``read_speed.jvm_cpu_seconds`` counts the JVM alone."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(f) for f in fields[11:15]) / tick
    jvms = {pid for pid, ppid in parent.items() if ppid == os.getpid()}
    total = 0.0
    for pid, seconds in cpu.items():
        up, seen = parent.get(pid, 0), 0
        while up > 1 and up not in jvms and seen < 64:
            up, seen = parent.get(up, 0), seen + 1
        if up in jvms and pid not in jvms:
            total += seconds
    return total


def make_text_tables(spark: Any, logs: Path, work: Path) -> dict[str, Path]:
    """A headered csv and tsv (one file each) of ``TEXT_COLUMNS`` of the logs; reused when there."""
    from pyspark.sql.types import DataType

    made = {}
    for fmt, sep in (("csv", ","), ("tsv", "\t")):
        folder = work / f"{logs.parent.name}_{fmt}"
        if not (folder / "_SUCCESS").exists():
            lines = spark.read.csv(str(logs), schema=DataType.fromDDL(criteo_ddl()), sep="\t")
            lines.select(*TEXT_COLUMNS).coalesce(1).write.mode("overwrite").csv(str(folder), header=True, sep=sep)
        made[fmt] = folder
    return made


def _parquet_rows(spark: Any, out: Path) -> Callable[[], Counts]:
    return lambda: {"rows": spark.read.parquet(str(out)).count()}


def _read_with_corrupt_column(spark: Any, job: Job, ddl: str, sep: str, header: bool) -> Callable[[], Counts]:
    """read_speed's plain twin: the schema plus a corrupt-record column, PERMISSIVE, written as Parquet."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StringType, StructField, StructType

    schema = DataType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    full = StructType([*schema.fields, StructField("_corrupt", StringType())])
    options = {"sep": sep, "header": header, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
    spark.read.csv(job.source, schema=full, **options).write.parquet(str(job.out))

    def count() -> Counts:
        written = spark.read.parquet(str(job.out))
        row = written.agg(F.count(F.lit(1)).alias("n"), F.count("_corrupt").alias("bad")).first()
        return {"rows": row["n"] - row["bad"], "rejected": row["bad"]}

    return count


def read_criteo(spark: Any, job: Job) -> Callable[[], Counts]:
    """``read`` format criteo: Spark's CSV reader, tab, the Criteo schema and a corrupt column."""
    return _read_with_corrupt_column(spark, job, criteo_ddl(), "\t", header=False)


def read_tsv(spark: Any, job: Job) -> Callable[[], Counts]:
    """``read`` format tsv with a schema: the same reader, header, the schema and a corrupt column."""
    return _read_with_corrupt_column(spark, job, TEXT_DDL, "\t", header=True)


def read_csv(spark: Any, job: Job) -> Callable[[], Counts]:
    """``read`` format csv, schema inferred: ``spark.read.csv(header, inferSchema)`` written as Parquet.

    An inferred schema has no corrupt column, so the twin cannot count rejected lines (``None``)."""
    spark.read.csv(job.source, header=True, inferSchema=True).write.parquet(str(job.out))
    return lambda: {"rows": spark.read.parquet(str(job.out)).count(), "rejected": None}


def generate_criteo_logs(spark: Any, job: Job) -> Callable[[], Counts]:
    """One text file of ``rows`` Criteo-shaped lines: label, 13 log-normal integers, 26 hex categoricals."""
    from pyspark.sql import functions as F

    from dagspec.kinds.ctr import logs_generator as g

    s = 1000  # seed 1, as the stage
    fields = [(F.rand(s) < g.BASE_CTR).cast("int")]
    for j in range(13):
        value = F.greatest(F.floor(F.exp(F.randn(s + 100 + j) * g.INT_SIGMA[j] + g.INT_MU[j])) - 1, F.lit(0))
        fields.append(F.when(F.rand(s + 300 + j) >= g.INT_MISSING[j], value))
    for j, cardinality in enumerate(g.CAT_CARDINALITY):
        tail = F.floor(F.pow(F.rand(s + 400 + j), g.CAT_EXPONENT[j]) * cardinality)
        index = F.when(F.rand(s + 600 + j) < g.CAT_HEAD[j], F.lit(0)).otherwise(tail)
        hexed = F.lpad(F.lower(F.hex(F.pmod(F.xxhash64(F.lit(j), index), F.lit(2**32)))), 8, "0")
        fields.append(F.when(F.rand(s + 500 + j) >= g.CAT_MISSING[j], hexed))
    line = F.concat_ws("\t", *[F.coalesce(f.cast("string"), F.lit("")) for f in fields])
    spark.range(0, job.rows, 1, numPartitions=2).select(line.alias("value")).repartition(1).write.text(str(job.out))

    def count() -> Counts:
        lines = spark.read.text(str(job.out))
        first = lines.first()
        return {"rows": lines.count(), "fields": len(first["value"].split("\t")) if first else None}

    return count


def sample(spark: Any, job: Job) -> Callable[[], Counts]:
    """Exactly n rows: a count, a seeded ``rand()`` threshold a little above n / N, the n lowest draws."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(job.source)
    n = sample_size(job.rows)
    p = with_margin(n, df.count())
    drawn = df.withColumn("_u", F.rand(SEED)).where(F.col("_u") < p)
    drawn.orderBy("_u").limit(n).drop("_u").write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


def ctr_features_hashed(spark: Any, job: Job) -> Callable[[], Counts]:
    """FeatureHasher over log1p'd integers and the categoricals as strings: label + features."""
    from pyspark.ml.feature import FeatureHasher
    from pyspark.sql import functions as F

    def integer(c: str) -> Any:
        value = F.col(c).cast("double")
        return F.when(value > 0, F.log1p(value)).otherwise(value).alias(c)

    df = spark.read.parquet(job.source)
    prepared = df.select("label", *[integer(c) for c in CRITEO_INTEGER_COLUMNS], *CRITEO_CATEGORICAL_COLUMNS)
    hasher = FeatureHasher(
        inputCols=[*CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS],
        outputCol="features",
        numFeatures=2**HASH_BITS,
        categoricalCols=CRITEO_CATEGORICAL_COLUMNS,
    )
    hasher.transform(prepared).select("label", "features").write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


def ctr_features_as_is(spark: Any, job: Job) -> Callable[[], Counts]:
    """label, I1..I13 as longs, C1..C26 hex -> signed 32-bit ints with ``conv``."""
    from pyspark.sql import functions as F

    def categorical(c: str) -> Any:
        value = F.conv(F.col(c), 16, 10).cast("long")
        return F.when(value >= 2**31, value - 2**32).otherwise(value).cast("int").alias(c)

    df = spark.read.parquet(job.source)
    df.select(
        "label", *[F.col(c).cast("long") for c in CRITEO_INTEGER_COLUMNS], *map(categorical, CRITEO_CATEGORICAL_COLUMNS)
    ).write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


def undersample(spark: Any, job: Job) -> Callable[[], Counts]:
    """Per-class counts, ``sampleBy`` a little above minority / class, then the first rows of each
    class in a seeded random order (a window) down to the minority count."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(job.source)
    counts = {row["label"]: row["count"] for row in df.groupBy("label").count().collect()}
    keep = min(counts.values())
    drawn = df.sampleBy("label", {c: with_margin(keep, n) for c, n in counts.items()}, SEED)
    ranked = drawn.withColumn("_r", F.row_number().over(Window.partitionBy("label").orderBy(F.rand(SEED))))
    ranked.where(F.col("_r") <= keep).drop("_r").write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


def split(spark: Any, job: Job) -> Callable[[], Counts]:
    """A seeded ``rand()`` threshold: ``_u < 0.8`` to train (in ``rand`` order: shuffle), the rest to test."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(job.source).withColumn("_u", F.rand(SEED))
    train = df.where(F.col("_u") < SPLIT["train"]).drop("_u")
    train.orderBy(F.rand(SEED + 1)).write.parquet(str(job.out / "train"))
    df.where(F.col("_u") >= SPLIT["train"]).drop("_u").write.parquet(str(job.out / "test"))
    return lambda: {name: spark.read.parquet(str(job.out / name)).count() for name in SPLIT}


def export_parquet(spark: Any, job: Job) -> Callable[[], Counts]:
    """``df.repartition(4).write.parquet``."""
    spark.read.parquet(job.source).repartition(EXPORT_PARTITIONS).write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


def export_csv(spark: Any, job: Job) -> Callable[[], Counts]:
    """``df.write.csv(header=True)``."""
    spark.read.parquet(job.source).write.csv(str(job.out), header=True)
    return lambda: {"rows": spark.read.csv(str(job.out), header=True).count()}


def topology_features(spark: Any, job: Job) -> Callable[[], Counts]:
    """The seed's own code (``physics_features.seed_variant``): MinMaxScaler, OneHotEncoder and the
    row-at-a-time Python UDF (DeltaR sort, sklearn StandardScaler), written as Parquet."""
    import physics_features
    from pyspark import cloudpickle

    # by value: the workers need not find bench/ on their path
    cloudpickle.register_pickle_by_value(physics_features)  # type: ignore[no-untyped-call]
    physics_features.seed_variant(spark.read.parquet(job.source)).write.parquet(str(job.out))
    return _parquet_rows(spark, job.out)


TWINS: dict[str, Callable[[Any, Job], Callable[[], Counts]]] = {
    "read_criteo": read_criteo,
    "read_csv": read_csv,
    "read_tsv": read_tsv,
    "generate_criteo_logs": generate_criteo_logs,
    "sample": sample,
    "ctr_features_hashed": ctr_features_hashed,
    "ctr_features_as_is": ctr_features_as_is,
    "undersample": undersample,
    "split": split,
    "export_parquet": export_parquet,
    "export_csv": export_csv,
    "topology_features": topology_features,
}
