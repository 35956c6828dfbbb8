"""The Spark session the single-machine benchmarks measure in: ``local[2]``, a 4 GB driver, no UI."""

from __future__ import annotations

from typing import Any


def local_session() -> Any:
    """``local[2]`` with a 4 GB driver, 4 shuffle partitions and no Spark UI (a SparkSession)."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
