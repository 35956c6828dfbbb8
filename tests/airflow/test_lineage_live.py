"""OpenLineage events of a real run: `dagspec run` (`airflow dags test`) with the provider's file transport.

A small spec of five kinds (read a CSV, check it, train a Spark ML forest, evaluate it, export the
checked table) runs twice:
the first run computes every stage, the second finds every checkpoint. Every event either run emits
validates against the OpenLineage spec's JSON schemas, and what the datasets say is what the
checkpoints committed: rows, content digests, the Parquet files' columns, the check's expectations,
the evaluation report.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dagspec.kinds.evaluation_report import read_evaluation_report
from tests.airflow.openlineage_schemas import event_errors
from tests.conftest import REPO
from tests.helpers import DAGSPEC

pytestmark = [pytest.mark.integration, pytest.mark.system, pytest.mark.spark]
DAG = "lineage_small"
SPEC = """\
dag_id: lineage_small
schedule: null
start_date: 2026-01-01
default_args: {{retries: 0, retry_delay: 1}}
storage: {{root: .dagspec/storage}}
stages:
  raw: {{kind: read, params: {{format: csv, header: true, path: "{input}", schema: "x1 DOUBLE, x2 DOUBLE, label INT"}}}}
  checked:
    kind: check
    inputs: {{data: raw}}
    params: {{rows: {{min: 10}}, columns: {{label: {{not_null: true, in: [0, 1]}}, x1: {{max: 1000}}}}}}
  forest:
    kind: train_spark_ml
    inputs: {{train: checked}}
    params: {{model: random_forest, features_col: null, num_trees: 5, max_depth: 3}}
  scores:
    kind: evaluate
    inputs: {{model: forest, data: checked}}
    params: {{bootstrap_replicates: 0}}
  published: {{kind: export, inputs: {{data: checked}}, params: {{path: lineage_small/checked, partitions: 2}}}}
"""
UPSTREAM = {
    "checked": {"data": "raw"},
    "forest": {"train": "checked"},
    "scores": {"model": "forest", "data": "checked"},
}


def _run(spec: Path, storage: Path, airflow_home: Path, events: Path) -> str:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_MODE="connect")
    # the provider's file transport, configured as docs/lineage.md says
    env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "file", "log_file_path": str(events), "append": True})
    cmd = [DAGSPEC, "run", str(spec), "--storage-root", str(storage)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _completes(events: Path) -> dict[str, dict[str, Any]]:
    """Stage -> the COMPLETE event of its task."""
    found = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["eventType"] == "COMPLETE" and event["job"]["name"].startswith(f"{DAG}."):
            found[event["job"]["name"].removeprefix(f"{DAG}.")] = event
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("lineage")
    data = base / "input.csv"
    # two separable classes, no randomness: a forest learns them, the check passes
    data.write_text(
        "x1,x2,label\n" + "".join(f"{(i % 7) / 3 + i % 2},{(i % 5) / 2 - i % 2},{i % 2}\n" for i in range(200))
    )
    spec = base / "pipelines" / f"{DAG}.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC.format(input=data))
    storage = base / "storage"
    first, second = base / "first.jsonl", base / "second.jsonl"
    ran = _run(spec, storage, airflow_home, first)
    hit = _run(spec, storage, airflow_home, second)
    assert "5 ran" in ran and "5 hits" in hit, ran + hit
    manifests = {}
    for success in (storage / DAG).glob("*/*/_SUCCESS"):
        manifests[success.parent.parent.name] = (
            success.parent,
            json.loads((success.parent / "manifest.json").read_text()),
        )
    return {"first": first, "second": second, "input": data, "manifests": manifests, "storage": storage}


def test_every_event_of_both_runs_validates_against_the_openlineage_schemas(runs: dict[str, Any]) -> None:
    for name in ("first", "second"):
        events = [json.loads(line) for line in runs[name].read_text().splitlines()]
        assert len(events) >= 9  # a START and a COMPLETE per task, the DAG run's COMPLETE
        for event in events:
            assert event_errors(event) == [], (event["eventType"], event["job"]["name"])


def test_outputs_carry_the_committed_rows_digest_and_parquet_columns(runs: dict[str, Any], spark: Any) -> None:
    completes = _completes(runs["first"])
    assert set(completes) == {"raw", "checked", "forest", "scores", "published"}
    for stage, event in completes.items():
        if stage == "published":
            continue  # its output is no checkpoint's: the next test
        folder, manifest = runs["manifests"][stage]
        outputs = {Path(d["name"]).name: d for d in event["outputs"]}
        assert set(outputs) == set(manifest["outputs"])
        for output, dataset in outputs.items():
            assert (dataset["namespace"], dataset["name"]) == ("file", str(folder / output))
            assert dataset["facets"]["version"]["datasetVersion"] == manifest["content"][output]
            link = dataset["facets"]["symlinks"]["identifiers"][0]
            assert (link["namespace"], link["name"]) == (f"dagspec://{DAG}", f"{stage}/{output}")
            if manifest["outputs"][output]["type"] != "table":
                assert "schema" not in dataset["facets"] and "outputStatistics" not in dataset["outputFacets"]
                continue
            assert dataset["outputFacets"]["outputStatistics"]["rowCount"] == manifest["rows"][output]
            fields = [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]
            parquet = spark.read.parquet(str(folder / output)).schema
            assert fields == [(f.name, f.dataType.simpleString()) for f in parquet.fields]


def test_inputs_are_the_upstream_outputs_and_the_source_file(runs: dict[str, Any]) -> None:
    completes = _completes(runs["first"])
    source = completes["raw"]["inputs"]
    assert [(d["namespace"], d["name"]) for d in source] == [("file", str(runs["input"]))]
    size = runs["input"].stat().st_size
    assert source[0]["facets"]["version"]["datasetVersion"].startswith(f"{size}:")
    assert source[0]["inputFacets"]["inputStatistics"]["size"] == size
    for stage, roles in UPSTREAM.items():
        inputs = {(d["namespace"], d["name"]): d for d in completes[stage]["inputs"]}
        for upstream in roles.values():
            folder, manifest = runs["manifests"][upstream]
            output = next(iter(manifest["outputs"]))
            dataset = inputs[("file", str(folder / output))]
            assert dataset["facets"]["version"]["datasetVersion"] == manifest["content"][output]
            if output in manifest["rows"]:
                assert dataset["inputFacets"]["inputStatistics"]["rowCount"] == manifest["rows"][output]
        assert len(inputs) == len(set(roles.values()))


def test_check_expectations_and_evaluation_metrics_are_facets(runs: dict[str, Any]) -> None:
    completes = _completes(runs["first"])
    _, check = runs["manifests"]["checked"]
    checked = completes["checked"]["inputs"][0]["inputFacets"]
    results = check["metrics"]["results"]
    assertions = checked["dataQualityAssertions"]["assertions"]
    assert [(a.get("column"), a["success"], a["actual"]) for a in assertions] == [
        (None if r["column"] == "rows" else r["column"], r["passed"], r["observed"]) for r in results
    ]
    assert assertions[0]["assertion"] == "row_count" and {a["severity"] for a in assertions} == {"error"}
    assert checked["dataQualityMetrics"]["rowCount"] == check["metrics"]["check_rows"] == 200
    folder, _ = runs["manifests"]["scores"]
    report = read_evaluation_report(folder / "report")
    facet = completes["scores"]["outputs"][0]["facets"]["dagspec_evaluation"]
    assert facet["metrics"] == {"roc_auc": report.roc_auc, "accuracy": report.accuracy, "log_loss": report.log_loss}
    assert (facet["model"], facet["flavor"], facet["rows"]) == ("forest", "spark_ml", report.rows)
    assert {k: v["support"] for k, v in facet["perClass"].items()} == {
        k: c.support for k, c in report.per_class.items()
    }


def test_a_hit_reports_the_same_datasets_as_the_run_that_computed_them(runs: dict[str, Any]) -> None:
    first, second = _completes(runs["first"]), _completes(runs["second"])
    assert set(second) == set(first)
    for stage, event in second.items():
        assert (event["inputs"], event["outputs"]) == (first[stage]["inputs"], first[stage]["outputs"]), stage


def test_an_export_reports_the_folder_it_published(runs: dict[str, Any], spark: Any) -> None:
    (dataset,) = _completes(runs["first"])["published"]["outputs"]
    target = runs["storage"] / "exports" / "lineage_small" / "checked"
    _, manifest = runs["manifests"]["published"]
    assert (dataset["namespace"], dataset["name"]) == ("file", str(target))
    marker = json.loads((target / "_DAGSPEC_EXPORT.json").read_text())
    assert dataset["facets"]["version"]["datasetVersion"] == marker["fingerprint"] == manifest["fingerprint"]
    assert dataset["outputFacets"]["outputStatistics"]["rowCount"] == manifest["metrics"]["rows"] == 200
    fields = [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]
    assert fields == [(f.name, f.dataType.simpleString()) for f in spark.read.parquet(str(target)).schema.fields]
