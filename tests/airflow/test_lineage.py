"""The pure parts of a stage's lineage: OpenLineage dataset names of paths, schema fields of Spark schemas."""

from __future__ import annotations

from dagspec.airflow.lineage import dataset_name, schema_fields


def test_paths_are_named_as_openlineage_names_files() -> None:
    assert dataset_name("/data/root/dag/stage/f1/data") == ("file", "/data/root/dag/stage/f1/data")
    assert dataset_name("file:///data/x") == ("file", "/data/x")
    assert dataset_name("hdfs://nn:8020/root/dag/s/f/data") == ("hdfs://nn:8020", "/root/dag/s/f/data")
    assert dataset_name("s3a://bucket/root/dag/s/f/data") == ("s3a://bucket", "root/dag/s/f/data")
    assert dataset_name("gs://bucket/root/x") == ("gs://bucket", "root/x")


def test_schema_fields_follow_nested_spark_types() -> None:
    simple = "struct<id:bigint,price:decimal(10,2),tags:array<string>,m:map<string,int>,p:struct<px:double,py:double>>"
    fields = schema_fields(simple)
    assert [(f.name, f.type, f.ordinal_position) for f in fields] == [
        ("id", "bigint", 1),
        ("price", "decimal(10,2)", 2),
        ("tags", "array<string>", 3),
        ("m", "map<string,int>", 4),
        ("p", "struct<px:double,py:double>", 5),
    ]
    assert [(f.name, f.type) for f in fields[4].fields or []] == [("px", "double"), ("py", "double")]
    assert all(not f.fields for f in fields[:4])
    assert [(f.name, f.type) for f in schema_fields("struct<a:b:int>")] == [("a:b", "int")]
    assert schema_fields("struct<>") == [] and schema_fields("") == []
