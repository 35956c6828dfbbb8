"""A stage's lineage without Airflow: dataset names of paths, schema fields of Spark schemas, partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from dagspec.airflow.lineage import dataset_name, schema_fields, stage_lineage
from dagspec.spec.loader import load_spec
from tests.airflow.openlineage_schemas import schema_errors
from tests.helpers import run_pipeline_in_process, write_spec


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


PARTITIONED = """
dag_id: parts_lineage
partitions: {{files: "{days}/day_{{day}}.csv"}}
stages:
  raw: {{kind: read, partitioned: true, params: {{format: csv, header: true, schema: "x INT", path: "{{{{ partition.path }}}}"}}}}
  recent: {{kind: sql, inputs: {{t: {{stage: raw, last: 2}}}}, params: {{query: "SELECT COUNT(*) AS n FROM t"}}}}
"""


def _facets(dataset: Any) -> dict[str, Any]:
    """A dataset as the provider sends it: every facet map, serialized."""
    found = Serde.to_dict(dataset)
    return {**found.get("facets", {}), **found.get("inputFacets", {}), **found.get("outputFacets", {})}


@pytest.mark.spark
def test_a_partitioned_stage_and_a_window_report_each_partition(spark: Any, home: Path, tmp_path: Path) -> None:
    days = tmp_path / "in"
    days.mkdir()
    for day, rows in (("1", 3), ("2", 4), ("3", 5)):
        (days / f"day_{day}.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(rows)))
    plan = run_pipeline_in_process(spark, load_spec(write_spec(tmp_path / "pipelines", PARTITIONED.format(days=days))))
    raw = stage_lineage(plan["raw"])
    assert [d.name for d in raw.inputs] == [str(days / f"day_{day}.csv") for day in ("1", "2", "3")]
    parts = plan["raw"].partitions
    assert [d.name for d in raw.outputs] == [parts[day].output_path("data") for day in ("1", "2", "3")]
    for dataset, rows in zip(raw.outputs, (3, 4, 5), strict=True):
        facets = _facets(dataset)
        assert facets["outputStatistics"]["rowCount"] == rows
        assert all(schema_errors(facet, facet["_schemaURL"]) == [] for facet in facets.values())
    window = stage_lineage(plan["recent"])  # the newest two days, each by its checkpoint and content
    assert [(d.name, _facets(d)["version"]["datasetVersion"]) for d in window.inputs] == [
        (parts[day].output_path("data"), parts[day].checkpoint.content("data")) for day in ("2", "3")
    ]
