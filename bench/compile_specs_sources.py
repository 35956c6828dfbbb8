"""The pipelines of ``compile_specs.py``: one pipeline description, written as a dagspec spec, a
dag-factory YAML file and a plain Python DAG file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OPERATOR = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator"
STAGES_PER_SPEC = 10


# --- one pipeline, described once and written three ways -------------------------------------


@dataclass(frozen=True)
class Stage:
    """One stage of a generated pipeline: what dagspec reads, and what the others hard-code."""

    name: str
    kind: str
    inputs: dict[str, str]
    params: dict[str, Any]
    executor_memory: str | None = None


def pipeline_stages(i: int) -> list[Stage]:
    """Ten stages using every shipped generic kind; values vary with ``i`` so specs differ."""
    seed = 1000 + i
    return [
        Stage("raw", "read", {}, {"format": "tsv", "path": "{{ params.input }}", "schema": "criteo"}),
        Stage(
            "clean",
            "sql",
            {"data": "raw"},
            {"query": f"SELECT * FROM data WHERE label IS NOT NULL AND i1 >= {i % 7} -- run {{{{ ds }}}}"},
        ),
        Stage("balanced", "undersample", {"data": "clean"}, {"label_col": "label", "seed": seed}),
        Stage(
            "split",
            "split",
            {"data": "balanced"},
            {
                "fractions": {"train": "{{ 1 - params.test_fraction }}", "test": "{{ params.test_fraction }}"},
                "seed": seed,
                "shuffle": ["train"],
            },
        ),
        Stage("train_sample", "sample", {"data": "split.train"}, {"n": "{{ params.sample_rows }}", "seed": seed}),
        Stage("test_sizes", "sample", {"data": "split.test"}, {"sizes": [100, 200 + i], "nested": True}),
        Stage(
            "joined",
            "sql",
            {"train": "train_sample", "test": "test_sizes.n100"},
            {"query": "SELECT *, 1 AS is_train FROM train UNION ALL SELECT *, 0 AS is_train FROM test"},
        ),
        Stage(
            "stats",
            "sql",
            {"data": "joined"},
            {"query": "SELECT is_train, label, count(*) AS n FROM data GROUP BY is_train, label"},
        ),
        Stage(
            "export_train",
            "export",
            {"data": "train_sample"},
            {"format": "parquet", "path": f"out/bench_{i:03d}/train", "partitions": 4},
            executor_memory="4g",
        ),
        Stage("export_stats", "export", {"data": "stats"}, {"format": "csv", "path": f"out/bench_{i:03d}/stats"}),
    ]


PARAMS: dict[str, dict[str, Any]] = {
    "input": {"type": "string", "default": "data/criteo_sample.tsv", "description": "Criteo TSV file or glob"},
    "test_fraction": {"type": "number", "default": 0.2, "minimum": 0.01, "maximum": 0.9},
    "sample_rows": {"type": "integer", "default": 1000, "minimum": 1},
}
SPARK_CONF = {"spark.sql.shuffle.partitions": 8}
RESOURCES = {"driver_memory": "2g", "executor_memory": "2g", "executor_cores": 1, "num_executors": 2}


def dag_id(i: int) -> str:
    return f"bench_{i:03d}"


def upstream_ids(stage: Stage) -> list[str]:
    return sorted({ref.partition(".")[0] for ref in stage.inputs.values()})


def dagspec_yaml(i: int) -> str:
    """The pipeline as a dagspec spec (flow style for params, as people write them)."""
    lines = [
        f"dag_id: {dag_id(i)}",
        f"description: generated benchmark pipeline {i}",
        "schedule: null",
        "start_date: 2026-01-01",
        "tags: [bench]",
        "default_args: {retries: 1, retry_delay: 60}",
        "params:",
        *(f"  {name}: {json.dumps(p)}" for name, p in PARAMS.items()),
        "spark:",
        f"  conf: {json.dumps(SPARK_CONF)}",
        f"  resources: {json.dumps(RESOURCES)}",
        "stages:",
    ]
    for stage in pipeline_stages(i):
        lines += [f"  {stage.name}:", f"    kind: {stage.kind}"]
        if stage.inputs:
            lines.append(f"    inputs: {json.dumps(stage.inputs)}")
        lines.append(f"    params: {json.dumps(stage.params)}")
        if stage.executor_memory:
            lines.append(f"    spark: {{resources: {{executor_memory: {stage.executor_memory}}}}}")
    return "\n".join(lines) + "\n"


def task_kwargs(i: int, stage: Stage) -> dict[str, Any]:
    """What a hand-written SparkSubmitOperator for this stage would be given."""
    return {
        "application": str(REPO / "jobs" / "run_stage.py"),
        "conn_id": "spark_default",
        "conf": {k: str(v) for k, v in SPARK_CONF.items()},
        **{k: v for k, v in RESOURCES.items()},
        **({"executor_memory": stage.executor_memory} if stage.executor_memory else {}),
        "name": f"{dag_id(i)}.{stage.name}",
        # the stage's config travels as the job argument; Airflow renders the Jinja in it
        "application_args": [json.dumps({"stage": stage.name, "kind": stage.kind, "params": stage.params})],
    }


def dagfactory_yaml(i: int) -> str:
    """The same DAG for dag-factory 1.1.0 (tasks as a mapping, edges as ``dependencies``)."""
    import yaml

    tasks: dict[str, Any] = {}
    for stage in pipeline_stages(i):
        task: dict[str, Any] = {"operator": OPERATOR, **task_kwargs(i, stage)}
        task["outlets"] = [f"dagspec://{dag_id(i)}/{stage.name}"]
        if upstream_ids(stage):
            task["dependencies"] = upstream_ids(stage)
        tasks[stage.name] = task
    config = {
        dag_id(i): {
            "description": f"generated benchmark pipeline {i}",
            "schedule": None,
            "catchup": False,
            "start_date": "2026-01-01",
            "tags": ["bench"],
            "max_active_runs": 1,
            "default_args": {"owner": "dagspec", "retries": 1, "retry_delay": 60},
            "params": {name: p["default"] for name, p in PARAMS.items()},
            "tasks": tasks,
        }
    }
    return yaml.safe_dump(config, sort_keys=False)


def plain_python(i: int) -> str:
    """The same DAG written by hand in Python."""
    lines = [
        '"""Generated benchmark DAG (plain Python)."""',
        "import datetime as dt",
        "",
        "from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator",
        "from airflow.sdk import DAG, Asset, Param",
        "",
        "with DAG(",
        f"    dag_id={dag_id(i)!r},",
        f"    description='generated benchmark pipeline {i}',",
        "    schedule=None,",
        "    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),",
        "    catchup=False,",
        "    tags=['bench'],",
        "    max_active_runs=1,",
        "    default_args={'owner': 'dagspec', 'retries': 1, 'retry_delay': dt.timedelta(seconds=60)},",
        "    params={",
    ]
    for name, p in PARAMS.items():
        schema = {k: v for k, v in p.items() if k not in ("default", "description")}
        lines.append(f"        {name!r}: Param({p['default']!r}, description={p.get('description')!r}, **{schema!r}),")
    lines += ["    },", ") as dag:"]
    for stage in pipeline_stages(i):
        kwargs = task_kwargs(i, stage)
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        outlet = f"Asset(name='{dag_id(i)}.{stage.name}', uri='dagspec://{dag_id(i)}/{stage.name}')"
        lines.append(f"    {stage.name} = SparkSubmitOperator(task_id={stage.name!r}, {args}, outlets=[{outlet}])")
    for stage in pipeline_stages(i):
        for up in upstream_ids(stage):
            lines.append(f"    {up} >> {stage.name}")
    return "\n".join(lines) + "\n"


DAGFACTORY_LOADER = '''"""dag-factory entry file (airflow DAG loader) for the benchmark folder."""
import os

from dagfactory import load_yaml_dags

folder = os.environ["BENCH_DAGFACTORY_DIR"]
load_yaml_dags(globals_dict=globals(), dags_folder=folder, defaults_config_path=folder)
'''


@dataclass
class Folders:
    dagspec: Path
    dagfactory: Path
    dagfactory_loader: Path
    plain: Path


def write_folders(root: Path, count: int) -> Folders:
    """Write ``count`` pipelines in the three formats under ``root``."""
    folders = Folders(root / "dagspec", root / "dagfactory", root / "dagfactory_loader.py", root / "plain")
    for folder in (folders.dagspec, folders.dagfactory, folders.plain):
        folder.mkdir(parents=True)
    for i in range(count):
        (folders.dagspec / f"{dag_id(i)}.yaml").write_text(dagspec_yaml(i))
        (folders.dagfactory / f"{dag_id(i)}.yaml").write_text(dagfactory_yaml(i))
        (folders.plain / f"{dag_id(i)}.py").write_text(plain_python(i))
    folders.dagfactory_loader.write_text(DAGFACTORY_LOADER)
    return folders
