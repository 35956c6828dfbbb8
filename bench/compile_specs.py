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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = REPO / "dags" / "dagspec_pipelines.py"

# dag-factory's listener plugin reports DAG runs to a telemetry endpoint; never from a benchmark.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("AIRFLOW__DAG_FACTORY__ENABLE_TELEMETRY", "False")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # DagBag logs every fill at INFO
# DagBag gives up on a file after 30 s of wall time; 100 dag-factory DAGs on a loaded machine take longer.
os.environ.setdefault("AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT", "600")


from compile_specs_sources import STAGES_PER_SPEC, write_folders  # noqa: E402

# --- the variants ------------------------------------------------------------------------------


def build_dagspec(folder: Path) -> dict[str, Any]:
    from dagspec.airflow.compiler import compile_pipeline
    from dagspec.spec.loader import load_spec, spec_files

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
