"""Spec compile time: dagspec vs dag-factory vs plain Python, same DAGs, same run.

Generates N pipelines of 10 stages (read, sql, undersample, split, sample, export, with Jinja
params) three ways into a temporary folder:

- dagspec specs (``pipelines/*.yaml`` format),
- dag-factory 1.1.0 YAML describing the same DAG (10 SparkSubmitOperator tasks, same edges),
- plain Python DAG files with the same SparkSubmitOperator tasks,

and measures, interleaving the variants so that load from other processes hits them alike:

- ``direct``: building the DAG objects in-process (dagspec: ``load_spec`` + ``compile_pipeline``
  per spec; dag-factory: ``load_yaml_dags`` over the folder; plain: importing each file),
- ``dagbag``: ``DagBag`` parse time of the entry file (``dags/dagspec_pipelines.py`` with
  ``DAGSPEC_PIPELINES`` pointing at the folder, a dag-factory loader file, the plain folder).

Every variant is checked to produce the same task ids and edges before anything is timed.

Usage: ``.venv/bin/python bench/compile_specs.py [--counts 10 100] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = REPO / "dags" / "dagspec_pipelines.py"
OPERATOR = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator"
STAGES_PER_SPEC = 10

# dag-factory's listener plugin reports DAG runs to a telemetry endpoint; never from a benchmark.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("AIRFLOW__DAG_FACTORY__ENABLE_TELEMETRY", "False")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # DagBag logs every fill at INFO
# DagBag gives up on a file after 30 s of wall time; 100 dag-factory DAGs on a loaded machine take longer.
os.environ.setdefault("AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT", "600")


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


# --- the variants ------------------------------------------------------------------------------


def build_dagspec(folder: Path) -> dict[str, Any]:
    from dagspec.compiler import compile_pipeline, spec_files
    from dagspec.spec import load_spec

    dags = {}
    for path in spec_files(folder):
        dag = compile_pipeline(load_spec(path), home=REPO)
        dags[dag.dag_id] = dag
    return dags


def build_dagfactory(folder: Path) -> dict[str, Any]:
    from airflow.sdk import DAG
    from dagfactory import load_yaml_dags

    found: dict[str, Any] = {}
    load_yaml_dags(globals_dict=found, dags_folder=str(folder), defaults_config_path=str(folder))
    return {k: v for k, v in found.items() if isinstance(v, DAG)}


_module_counter = 0


def build_plain(folder: Path) -> dict[str, Any]:
    """Import every file under a fresh module name, as DagBag does (bytecode cache included)."""
    global _module_counter
    from airflow.sdk import DAG

    dags = {}
    for path in sorted(folder.glob("*.py")):
        _module_counter += 1
        spec = importlib.util.spec_from_file_location(f"bench_plain_{_module_counter}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        dags.update({v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)})
    return dags


def dagbag(path: Path) -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(path))
    if bag.import_errors:
        raise RuntimeError(f"DagBag({path}) import errors: {bag.import_errors}")
    return bag.dags


def shape(dag: Any) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """Task ids and edges: what must be equal across the variants."""
    tasks = frozenset(dag.task_ids)
    edges = frozenset((t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids)
    return tasks, edges


def check_same_shapes(results: dict[str, dict[str, Any]], count: int) -> None:
    reference = results["dagspec direct"]
    assert len(reference) == count, f"dagspec built {len(reference)} DAGs, expected {count}"
    for name, dags in results.items():
        assert sorted(dags) == sorted(reference), f"{name}: DAG ids differ"
        for dag_id_, dag in dags.items():
            assert len(dag.tasks) == STAGES_PER_SPEC, f"{name} {dag_id_}: {len(dag.tasks)} tasks"
            assert shape(dag) == shape(reference[dag_id_]), f"{name} {dag_id_}: tasks or edges differ"


# --- timing ------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call. CPU time is what stays honest when other processes
    share the cores: waiting for a core shows up in wall time only."""
    gc.collect()  # start every measurement with the same heap state
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def run(count: int, repeat: int, root: Path) -> list[dict[str, Any]]:
    folders = write_folders(root / f"n{count}", count)
    os.environ["DAGSPEC_PIPELINES"] = str(folders.dagspec)
    os.environ["BENCH_DAGFACTORY_DIR"] = str(folders.dagfactory)
    variants: dict[str, Callable[[], dict[str, Any]]] = {
        "dagspec direct": lambda: build_dagspec(folders.dagspec),
        "dag-factory direct": lambda: build_dagfactory(folders.dagfactory),
        "plain direct": lambda: build_plain(folders.plain),
        "dagspec dagbag": lambda: dagbag(DAG_FILE),
        "dag-factory dagbag": lambda: dagbag(folders.dagfactory_loader),
        "plain dagbag": lambda: dagbag(folders.plain),
    }
    # Warm-up (imports, bytecode caches) and the shape check.
    check_same_shapes({name: fn() for name, fn in variants.items()}, count)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    order = list(variants)
    rng = random.Random(count)
    for _ in range(repeat):
        rng.shuffle(order)  # interleaved, in a fresh order each round: noise spreads over all
        for name in order:
            samples[name].append(timed(variants[name]))
    rows = []
    for name in variants:
        wall = [w * 1000 / count for w, _ in samples[name]]
        cpu = [c * 1000 / count for _, c in samples[name]]
        rows.append(
            {
                "count": count,
                "variant": name,
                "wall_ms_per_dag": statistics.median(wall),
                "wall_min": min(wall),
                "wall_max": max(wall),
                "cpu_ms_per_dag": statistics.median(cpu),
                "cpu_min": min(cpu),
                "cpu_max": max(cpu),
                "runs": len(wall),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| specs | variant | CPU ms/DAG median (min-max) | wall ms/DAG median (min-max) | runs |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['count']} | {r['variant']} | {r['cpu_ms_per_dag']:.2f} ({r['cpu_min']:.2f}-{r['cpu_max']:.2f}) "
            f"| {r['wall_ms_per_dag']:.2f} ({r['wall_min']:.2f}-{r['wall_max']:.2f}) | {r['runs']} |"
        )
    print()
    print("| specs | mode | clock | dagspec ms/DAG | plain | dag-factory | dagspec/plain | dagspec/dag-factory |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for count in sorted({r["count"] for r in rows}):
        for mode in ("direct", "dagbag"):
            for clock in ("cpu", "wall"):
                by = {(r["count"], r["variant"]): r[f"{clock}_ms_per_dag"] for r in rows}
                ds, pl, df = (by[(count, f"{v} {mode}")] for v in ("dagspec", "plain", "dag-factory"))
                print(
                    f"| {count} | {mode} | {clock} | {ds:.2f} | {pl:.2f} | {df:.2f} | {ds / pl:.2f} | {ds / df:.2f} |"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 100], help="specs per folder")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per variant (median reported)")
    parser.add_argument("--json", type=Path, help="also write the raw rows here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    logging.disable(logging.INFO)  # dag-factory and DagBag log every file at INFO
    warnings.simplefilter("ignore")
    rows = []
    with tempfile.TemporaryDirectory(prefix="dagspec-bench-") as tmp:
        for count in args.counts:
            rows += run(count, args.repeat, Path(tmp))
            print_table([r for r in rows if r["count"] == count])  # partial results survive an interruption
            print(flush=True)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, repeat={args.repeat}\n")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
