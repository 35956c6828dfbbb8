"""The ``dagspec`` command: validate, list, show, run, init, generate, cluster, airflow.

Heavy modules (Airflow, Spark) are imported only by the verbs that need them, so ``validate`` and
``show`` answer in well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dagspec.errors import DagspecError, SpecError
from dagspec.spec import FORCE_PARAM, PipelineSpec, load_spec

SPEC_SUFFIXES = (".yaml", ".yml")


def project_home() -> Path:
    """$DAGSPEC_HOME, else the current directory."""
    return Path(os.environ.get("DAGSPEC_HOME") or os.getcwd()).resolve()


def default_pipelines_dir(home: Path) -> Path:
    """$DAGSPEC_PIPELINES, else ``<home>/pipelines``."""
    return Path(os.environ.get("DAGSPEC_PIPELINES") or home / "pipelines")


def _display(path: Path, home: Path) -> str:
    path = path.resolve()
    return os.path.relpath(path, home) if path.is_relative_to(home) else str(path)


def _spec_paths(paths: Sequence[str], home: Path) -> list[Path]:
    if not paths:
        folder = default_pipelines_dir(home)
        return sorted(p for p in folder.glob("*") if p.suffix in SPEC_SUFFIXES)
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found.extend(sorted(p for p in path.glob("*") if p.suffix in SPEC_SUFFIXES) if path.is_dir() else [path])
    return found


def _load(path: Path, home: Path) -> PipelineSpec:
    if not path.exists():
        raise DagspecError(f"{path}: no such spec file")
    return load_spec(path, _display(path, home))


# --- the local Airflow environment -------------------------------------------------------------


def airflow_home(home: Path) -> Path:
    """$DAGSPEC_AIRFLOW_HOME, else ``<home>/.dagspec/airflow`` (SQLite, created on demand)."""
    return Path(os.environ.get("DAGSPEC_AIRFLOW_HOME") or home / ".dagspec" / "airflow").resolve()


def airflow_env(home: Path) -> dict[str, str]:
    """The environment every local Airflow command of dagspec runs with."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "AIRFLOW_HOME": str(airflow_home(home)),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "DAGSPEC_HOME": str(home),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for passthrough in ("DAGSPEC_PIPELINES", "DAGSPEC_STORAGE_ROOT"):
        if os.environ.get(passthrough):
            env[passthrough] = os.environ[passthrough]
    return env


def _airflow(args: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    binary = str(Path(sys.executable).parent / "airflow")
    return subprocess.run([binary, *args], env={**os.environ, **env}, text=True, **kwargs)


def ensure_airflow_db(env: dict[str, str]) -> Path:
    """Create and migrate the SQLite metadata DB if it does not exist yet."""
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    if not db.exists():
        Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
        print(f"creating the local Airflow DB in {env['AIRFLOW_HOME']} ...", flush=True)
        done = _airflow(["db", "migrate"], env, capture_output=True)
        if done.returncode != 0:
            raise DagspecError(f"airflow db migrate failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return db


def connection_env_var(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


def ensure_spark_connection(env: dict[str, str], conn_id: str) -> str:
    """Point ``conn_id`` at local[*] unless it exists (in the environment or the local DB).

    Returns where it came from. Airflow 3 creates no connections, and without one the provider
    silently submits to YARN.
    """
    var = connection_env_var(conn_id)
    if os.environ.get(var):
        env[var] = os.environ[var]
        return "environment"
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(db) as con:
        if con.execute("SELECT 1 FROM connection WHERE conn_id = ?", (conn_id,)).fetchone():
            return "airflow db"
    env[var] = json.dumps({"conn_type": "spark", "host": "local[*]"})
    return "local[*] (default)"


def write_env_file(home: Path, env: dict[str, str]) -> Path:
    """``env`` beside the Airflow home (``.dagspec/env``): `source` it to use plain ``airflow``."""
    path = Path(env["AIRFLOW_HOME"]).parent / "env"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# generated by dagspec; `source .dagspec/env` then e.g. `airflow dags test ctr_demo`"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def prepare_local_airflow(home: Path, conn_ids: Sequence[str] = ("spark_default",)) -> dict[str, str]:
    """AIRFLOW_HOME migrated, connections ensured, ``.dagspec/env`` written; returns the env."""
    env = airflow_env(home)
    ensure_airflow_db(env)
    for conn_id in conn_ids:
        ensure_spark_connection(env, conn_id)
    write_env_file(home, env)
    return env


# --- verbs ---------------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    home = project_home()
    failed = 0
    paths = _spec_paths(args.paths, home)
    if not paths:
        print("no spec files found", file=sys.stderr)
        return 1
    for path in paths:
        try:
            spec = _load(path, home)
        except SpecError as exc:
            failed += 1
            print(exc, file=sys.stderr)
            continue
        print(f"ok  {_display(path, home)}: dag {spec.dag_id!r}, {len(spec.stages)} stages")
    return 1 if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    home = project_home()
    for path in _spec_paths([], home):
        try:
            spec = _load(path, home)
            print(f"{spec.dag_id:30} {len(spec.stages):3} stages  {_display(path, home)}")
        except SpecError as exc:
            print(f"{'(invalid)':30} {len(exc.issues):3} errors  {_display(path, home)}")
    return 0


def _parse_overrides(pairs: Sequence[str], spec: PipelineSpec) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise DagspecError(f"-p expects name=value, got {pair!r}")
        if name not in spec.params and name != FORCE_PARAM:
            known = ", ".join(spec.params) or "none"
            raise DagspecError(f"unknown param {name!r} for {spec.dag_id}; params: {known}")
        param = spec.params.get(name)
        value: Any = raw if param is not None and param.type == "string" else yaml.safe_load(raw)
        overrides[name] = value
    return overrides


def stage_rows(spec: PipelineSpec, overrides: dict[str, Any], storage_root: str | None) -> list[dict[str, Any]]:
    """Per stage: name, kind, inputs, fingerprint, state, output path (for ``show``)."""
    from dagspec.plan import checkpoint_exists, default_context, resolve_pipeline

    plan = resolve_pipeline(spec, default_context(spec, overrides), storage_root=storage_root)
    return [
        {
            "name": s.name,
            "kind": s.kind,
            "inputs": {role: f"{i.stage}.{i.output}" for role, i in s.inputs.items()},
            "fingerprint": s.fingerprint,
            "state": "done" if checkpoint_exists(s) else "missing",
            "output": s.checkpoint_dir,
        }
        for s in plan.values()
    ]


def cmd_show(args: argparse.Namespace) -> int:
    home = project_home()
    spec = _load(Path(args.spec), home)
    rows = stage_rows(spec, _parse_overrides(args.param, spec), _abs_root(args.storage_root))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{spec.dag_id}: {spec.description or ''}")
    for row in rows:
        inputs = ", ".join(f"{k}={v}" for k, v in row["inputs"].items()) or "-"
        print(f"  {row['name']:20} {row['kind']:22} {row['fingerprint']}  {row['state']:7}  in: {inputs}")
        print(f"  {'':20} -> {row['output']}")
    return 0


def _abs_root(root: str | None) -> str | None:
    if root is None or "://" in root:
        return root
    return str(Path(root).resolve())


def _latest_run_states(db: Path, dag_id: str, since: float) -> tuple[str | None, list[tuple[str, str, float]]]:
    with sqlite3.connect(db) as con:
        row = con.execute(
            "SELECT run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)
        ).fetchone()
        if row is None:
            return None, []
        tasks = con.execute(
            "SELECT task_id, state, COALESCE(duration, 0) FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, row[0]),
        ).fetchall()
    return row[1], [(t, s or "none", float(d)) for t, s, d in tasks]


def cmd_run(args: argparse.Namespace) -> int:
    home = project_home()
    spec_path = Path(args.spec).resolve()
    spec = _load(spec_path, home)
    overrides = _parse_overrides(args.param, spec)
    if args.force:
        overrides[FORCE_PARAM] = True
    if spec_path.parent != default_pipelines_dir(home).resolve():
        os.environ["DAGSPEC_PIPELINES"] = str(spec_path.parent)
    if args.storage_root:
        os.environ["DAGSPEC_STORAGE_ROOT"] = _abs_root(args.storage_root) or ""
    env = prepare_local_airflow(home, [spec.spark.conn_id])
    log_dir = home / ".dagspec" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{spec.dag_id}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    print(
        f"running {spec.dag_id} ({len(spec.stages)} stages) through `airflow dags test`; log: {_display(log_path, home)}"
    )
    started = time.time()
    with log_path.open("w") as log:
        cmd = ["dags", "test", spec.dag_id, "--conf", json.dumps(overrides)]
        done = _airflow(cmd, env, stdout=None if args.verbose else log, stderr=subprocess.STDOUT)
    state, tasks = _latest_run_states(Path(env["AIRFLOW_HOME"]) / "airflow.db", spec.dag_id, started)
    order = {name: i for i, name in enumerate(spec.stage_order())}
    for task_id, task_state, duration in sorted(tasks, key=lambda t: order.get(t[0], 0)):
        print(f"  {task_id:24} {task_state:16} {duration:7.1f} s")
    print(f"{spec.dag_id}: {state} in {time.time() - started:.1f} s")
    if state != "success" or done.returncode != 0:
        if not args.verbose:
            tail = log_path.read_text().splitlines()[-40:]
            print("\n".join(["--- last lines of the log ---", *tail]), file=sys.stderr)
        return 1
    try:
        rows = stage_rows(spec, overrides, None)
    except DagspecError:
        return 0  # params that depend on the run (ds, run_id) cannot be resolved here
    print("outputs (manifest.json in each):")
    for row in rows:
        print(f"  {row['name']:24} {row['output']}")
    _print_reports(spec, rows)
    return 0


def _print_reports(spec: PipelineSpec, rows: list[dict[str, Any]]) -> None:
    """Show the markdown reports (metrics tables) that the final stages wrote."""
    consumed = {ref.partition(".")[0] for stage in spec.stages.values() for ref in stage.inputs.values()}
    for row in rows:
        if row["name"] in consumed or "://" in row["output"]:
            continue
        for report in sorted(Path(row["output"]).glob("*/*.md")):
            print(f"\n{report}:\n{report.read_text()}")


def cmd_init(args: argparse.Namespace) -> int:
    home = project_home()
    env = prepare_local_airflow(home, args.conn_id or ["spark_default"])
    print(f"Airflow home: {env['AIRFLOW_HOME']}\nnow: source {_display(home / '.dagspec' / 'env', home)}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    return int(args.generator.run(args))


def cmd_service(args: argparse.Namespace) -> int:
    services = importlib.import_module("dagspec.services")
    function = getattr(services, f"{args.service}_{args.action}")
    result = function()
    if result is not None:
        print(result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dagspec", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    p = verbs.add_parser("validate", help="check spec files (default: every spec in pipelines/)")
    p.add_argument("paths", nargs="*")
    p.set_defaults(func=cmd_validate)

    p = verbs.add_parser("list", help="list the specs of the pipelines folder")
    p.set_defaults(func=cmd_list)

    p = verbs.add_parser("show", help="stages, fingerprints and checkpoint state of a spec")
    p.add_argument("spec")
    p.add_argument("--json", action="store_true")
    p.add_argument("--storage-root")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    p.set_defaults(func=cmd_show)

    p = verbs.add_parser("run", help="run a spec locally through `airflow dags test`")
    p.add_argument("spec")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--storage-root")
    p.add_argument("--force", action="store_true", help="recompute every stage")
    p.add_argument("-v", "--verbose", action="store_true", help="stream Airflow's output")
    p.set_defaults(func=cmd_run)

    p = verbs.add_parser("init", help="create the local Airflow home and .dagspec/env")
    p.add_argument("--conn-id", action="append")
    p.set_defaults(func=cmd_init)

    p = verbs.add_parser("generate", help="write synthetic data")
    generators = p.add_subparsers(dest="name", required=True)
    from dagspec.generators import GENERATORS

    for name in GENERATORS:
        try:
            module = importlib.import_module(f"dagspec.generators.{name}")
        except ImportError:
            continue
        g = generators.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else None)
        module.add_arguments(g)
        g.set_defaults(func=cmd_generate, generator=module)

    for service in ("cluster", "airflow"):
        p = verbs.add_parser(service, help=f"start or stop the local {service} (background processes)")
        p.add_argument("action", choices=["up", "down", "status"])
        p.set_defaults(func=cmd_service, service=service)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dagspec`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head`
        return 0
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    except DagspecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
