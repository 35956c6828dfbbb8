"""The job that records the classes a Spark JVM loads (``dagspec.jvm``): the paths every stage takes
(CSV and Parquet I/O, shuffles, windows, a pandas UDF, a collect).

``dagspec jvm-archive`` runs it once per install, and the Dockerfile runs this file before the rest
of the project is copied (a code change keeps that image layer). So it is plain pyspark and imports
nothing of dagspec: a script spark-submit runs on its own, the one session it makes only warms the JVM.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _double_x(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        yield batch.assign(x=batch["x"] * 2)


def main() -> None:
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F

    spark = SparkSession.builder.appName("dagspec.jvm-warmup").getOrCreate()
    with tempfile.TemporaryDirectory() as folder:
        csv = Path(folder) / "in.csv"
        csv.write_text("label,x,c\n" + "".join(f"{i % 2},{i},c{i % 7}\n" for i in range(1000)))
        frame = spark.read.option("header", True).option("inferSchema", True).csv(str(csv))
        ranked = frame.withColumn("r", F.row_number().over(Window.partitionBy("label").orderBy(F.rand(1))))
        ranked.groupBy("label", "c").agg(F.count("*"), F.avg("x")).write.parquet(f"{folder}/agg")
        doubled = frame.mapInPandas(_double_x, frame.schema)
        doubled.write.mode("overwrite").parquet(f"{folder}/doubled")
        back = spark.read.parquet(f"{folder}/doubled")
        back.join(frame.select("c").distinct(), "c").orderBy("x").limit(5).collect()
        back.count()
    spark.stop()


if __name__ == "__main__":
    main()
