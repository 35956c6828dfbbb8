"""A written table's rows and schema from its Parquet footers: what Spark itself reads back, or None."""

from __future__ import annotations

from pathlib import Path

from dagspec.footers import rows_and_schema


def _spark_says(spark, path: Path) -> tuple[int, str]:
    written = spark.read.parquet(str(path))
    return written.count(), written.schema.simpleString()


def test_footers_say_what_spark_reads_back_for_every_type_a_kind_writes(spark, tmp_path: Path) -> None:
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql.types import StructField, StructType

    rows = [
        (i, float(i) / 3, f"c{i % 7}", [0.5 * i, 1.0], {"k": i}, Vectors.dense([i, 2.0]), i % 2 == 0)
        for i in range(1000)
    ]
    ddl = "i long, x double, s string, a array<double>, m map<string,int>, b boolean"
    fields = StructType.fromDDL(ddl).fields
    schema = StructType([*fields[:5], StructField("v", VectorUDT()), fields[5]])
    df = spark.createDataFrame(rows, schema)
    path = tmp_path / "t"
    df.repartition(3).write.parquet(str(path))
    assert len(list(path.glob("*.parquet"))) == 3
    assert rows_and_schema(str(path)) == _spark_says(spark, path) == (1000, df.schema.simpleString())


def test_an_empty_output_and_a_decimal_are_counted_as_spark_counts_them(spark, tmp_path: Path) -> None:
    path = tmp_path / "empty"
    spark.createDataFrame([], "d decimal(10,2), t timestamp, n int not null").write.parquet(str(path))
    assert rows_and_schema(str(path)) == _spark_says(spark, path) == (0, "struct<d:decimal(10,2),t:timestamp,n:int>")


def test_what_the_footers_cannot_answer_exactly_is_left_to_spark(spark, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    partitioned = tmp_path / "partitioned"  # the partition column is in no footer
    spark.range(10).selectExpr("id", "id % 2 as p").write.partitionBy("p").parquet(str(partitioned))
    assert rows_and_schema(str(partitioned)) is None

    foreign = tmp_path / "foreign"  # written without Spark's schema
    foreign.mkdir()
    pq.write_table(pa.table({"x": [1, 2, 3]}), foreign / "part-0.parquet")
    assert rows_and_schema(str(foreign)) is None

    mixed = tmp_path / "mixed"  # two schemas in one folder
    spark.range(3).write.parquet(str(mixed))
    spark.range(3).selectExpr("cast(id as string) as id").write.mode("append").parquet(str(mixed))
    assert rows_and_schema(str(mixed)) is None

    assert rows_and_schema(str(tmp_path / "missing")) is None
    assert rows_and_schema("s3a://bucket/table") is None


def test_an_empty_table_written_without_spark_reads_back_as_spark_writes_it(spark, tmp_path: Path) -> None:
    import pytest
    from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

    from dagspec.footers import write_empty

    schema = StructType(
        [
            StructField("line", StringType()),
            StructField("n", LongType(), False),
            StructField("a", ArrayType(DoubleType())),
        ]
    )
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert write_empty(str(ours), schema)
    spark.createDataFrame([], schema).write.parquet(str(theirs))
    assert (ours / "_SUCCESS").exists()
    assert (
        rows_and_schema(str(ours))
        == rows_and_schema(str(theirs))
        == (0, "struct<line:string,n:bigint,a:array<double>>")
    )
    read_back = spark.read.parquet(str(ours))
    assert read_back.count() == 0 and read_back.schema == spark.read.parquet(str(theirs)).schema
    with pytest.raises(FileExistsError):  # never over a folder that is there, as Spark's mode "error"
        write_empty(str(ours), schema)
    assert not write_empty("s3a://bucket/empty", schema)
