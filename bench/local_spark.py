"""The Spark session the single-machine benchmarks measure in: ``local[2]``, a 4 GB driver, no UI,
the JVM options dagspec gives its own Spark JVMs (``dagspec.jvm``: the class archive) and the
settings every stage's session gets (``dagspec.job.session.CODEGEN_CONF``), so both sides of a
comparison run as a stage runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def local_session() -> Any:
    """``local[2]`` with a 4 GB driver, 4 shuffle partitions and no Spark UI (a SparkSession)."""
    import os

    from pyspark.sql import SparkSession

    from dagspec import jvm
    from dagspec.job.session import CODEGEN_CONF

    os.environ.update(jvm.jvm_env())
    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
    )
    for key, value in CODEGEN_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def stage_session(work: Path) -> Any:
    """``local_session`` for stages run in this process (``run_stage``): their storage under
    ``work``, the dagspec the stages come from printed, Spark's log at errors only."""
    import os

    import dagspec

    work.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSPEC_STORAGE_ROOT"] = str(work / "storage")
    os.environ.setdefault("DAGSPEC_HOME", str(work))
    print(f"dagspec from {Path(dagspec.__file__).parent}", flush=True)
    spark = local_session()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
