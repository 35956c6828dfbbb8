"""The Spark session the single-machine benchmarks measure in: ``local[2]``, a 4 GB driver, no UI,
and the JVM options dagspec gives its own Spark JVMs (``dagspec.jvm``: the class archive, generated
code compiled whatever its size), so both sides of a comparison run in the JVM a stage runs in."""

from __future__ import annotations

from typing import Any


def local_session() -> Any:
    """``local[2]`` with a 4 GB driver, 4 shuffle partitions and no Spark UI (a SparkSession)."""
    import os

    from pyspark.sql import SparkSession

    from dagspec import jvm

    os.environ.update(jvm.jvm_env())

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
