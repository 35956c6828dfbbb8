"""The CTR stages through ``dagspec run``: each task's wall time as Airflow records it, beside the fit.

Used by ``bench/ctr.py`` (its ``--airflow`` section). The spec is written into the pipelines folder
of a private project home under the scratch directory (its own Airflow home and SQLite DB, storage
root, ``.dagspec/`` and Spark Connect server on a free port; ``dags/`` and ``jobs/`` link to this
checkout), so the shared ``.dagspec/`` of the checkout is never touched. Each repeat is one
``dagspec run <spec> -p rep=<k> --storage-root <root>``: real ``airflow dags test``, every stage in
its real execution mode (the local default: data stages as clients of the Spark Connect server,
``train_*`` stages through spark-submit). The first repeat computes every stage; later ones change
only the train stages' seed, so the data stages are checkpoint hits there (``--force`` is added
when a train stage of that repeat is already committed, e.g. with a reused ``--work``).

Per task: the duration printed by ``dagspec run`` (Airflow's ``task_instance.duration``) and, for
a train stage, ``train_time_s`` from its committed ``model.json`` (the fit including loading the
data). The difference is what a stage costs outside its fit: the Airflow task process, the operator,
spark-submit (a JVM, a SparkSession), the checkpoint commit and writing the model.
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dagspec.kinds.model_card import ModelCard, read_model_card

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DAG_ID = "ctr_bench"
TRAIN_STAGES = ("xgb_single", "xgb_spark", "lr")
# the plain-library fit (in-process section's summary key) each train stage is compared with
PLAIN_OF = {"xgb_single": "plain_xgboost", "xgb_spark": "plain_xgboost", "lr": "sklearn_lr"}
TASK_LINE = re.compile(r"^\s+(\S+)\s+(\S+)\s+([0-9.]+) s$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_home(root: Path, spec_text: str) -> dict[str, str]:
    """A private project home (created once, reused with ``--work``); returns its environment."""
    if not (root / "dags").exists():
        (root / "dags").mkdir(parents=True)
        (root / "dags" / "dagspec_pipelines.py").symlink_to(REPO / "dags" / "dagspec_pipelines.py")
        (root / "jobs").symlink_to(REPO / "jobs")
        (root / "plugins").mkdir()
        (root / "pipelines").mkdir()
        # the port is kept with the home: its Connect server records it and is reused with --work
        (root / "connect-port").write_text(str(_free_port()))
    (root / "pipelines" / f"{DAG_ID}.yaml").write_text(spec_text)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC_"))}
    return {
        **keep,
        "DAGSPEC_HOME": str(root),
        "DAGSPEC_AIRFLOW_HOME": str(root / ".dagspec" / "airflow"),
        "DAGSPEC_PIPELINES": str(root / "pipelines"),
        "DAGSPEC_STORAGE_ROOT": str(root / "storage"),
        "DAGSPEC_CONNECT_PORT": (root / "connect-port").read_text().strip(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DO_NOT_TRACK": "1",
    }


def _dagspec(args: list[str], env: dict[str, str], root: Path) -> str:
    done = subprocess.run([str(BIN / "dagspec"), *args], env=env, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"dagspec {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def parse_task_lines(stdout: str) -> dict[str, tuple[str, float]]:
    """``{task_id: (state, seconds)}`` from the table ``dagspec run`` prints."""
    tasks = {}
    for line in stdout.splitlines():
        match = TASK_LINE.match(line)
        if match:
            tasks[match.group(1)] = (match.group(2), float(match.group(3)))
    return tasks


def _model_card(output: str, since: float) -> ModelCard:
    """The run's model card: in ``output`` (the checkpoint ``show`` names), else the stage's newest commit.

    The fallback is for a source change between ``show`` and the run (others edit this checkout
    while benchmarks run): the fingerprint the run used is then not the one ``show`` printed.
    """
    path = Path(output.removeprefix("file://"))
    if not (path / "model" / "model.json").exists():
        commits = [s for s in path.parent.glob("*/_SUCCESS") if s.stat().st_mtime >= since]
        if not commits:
            raise RuntimeError(f"no checkpoint of {path.parent.name} committed by this run under {path.parent}")
        path = max(commits, key=lambda s: s.stat().st_mtime).parent
        print(f"  note: {path.parent.name} committed {path.name}, not {output} (the source changed?)", flush=True)
    return read_model_card(path / "model")


def airflow_runs(spec_text: str, root: Path, repeats: int) -> list[dict[str, Any]]:
    """One ``dagspec run`` per repeat; per stage its task wall, mode, whether it ran, and the fit."""
    env = make_home(root, spec_text)
    spec = str(root / "pipelines" / f"{DAG_ID}.yaml")
    storage = ["--storage-root", env["DAGSPEC_STORAGE_ROOT"]]
    runs: list[dict[str, Any]] = []
    try:
        for rep in range(repeats):
            param = ["-p", f"rep={rep}"]
            before = {
                row["name"]: row for row in json.loads(_dagspec(["show", spec, "--json", *storage, *param], env, root))
            }
            force = any(before[name]["state"] == "done" for name in TRAIN_STAGES)
            t0, since = time.perf_counter(), time.time() - 1
            stdout = _dagspec(["run", spec, *storage, *param, *(["--force"] if force else [])], env, root)
            command_s = time.perf_counter() - t0
            tasks = parse_task_lines(stdout)
            if set(tasks) != set(before) or any(state != "success" for state, _ in tasks.values()):
                raise RuntimeError(f"unexpected task table:\n{stdout}")
            run: dict[str, Any] = {"rep": rep, "forced": force, "command_s": command_s, "stages": {}}
            for name, row in before.items():
                stage = {"wall_s": tasks[name][1], "mode": row["mode"], "ran": force or row["state"] != "done"}
                if name in TRAIN_STAGES:
                    card = _model_card(row["output"], since)
                    stage |= {"fit_s": card.train_time_s, "peak_memory_mb": card.peak_memory_mb}
                run["stages"][name] = stage
            line = ", ".join(
                f"{n} {s['wall_s']:.1f}" + ("" if s["ran"] else " (hit)") for n, s in run["stages"].items()
            )
            print(f"airflow rep {rep}: dagspec run {command_s:.1f} s; tasks: {line}", flush=True)
            runs.append(run)
    finally:
        # the Connect server of the private home is ours: stop it (the checkout's server is not touched)
        subprocess.run([str(BIN / "dagspec"), "connect", "down"], env=env, cwd=root, capture_output=True, check=False)
    return runs


def summarize(runs: list[dict[str, Any]], plain: dict[str, float]) -> list[dict[str, Any]]:
    """Per stage (spec order): medians over the repeats in which it ran; ``plain``: plain fit medians."""
    rows = []
    for name in runs[0]["stages"]:
        ran = [r["stages"][name] for r in runs if r["stages"][name]["ran"]]
        hits = [r["stages"][name]["wall_s"] for r in runs if not r["stages"][name]["ran"]]
        row: dict[str, Any] = {"stage": name, "mode": runs[0]["stages"][name]["mode"], "n": len(ran)}
        row["wall_s"] = statistics.median(s["wall_s"] for s in ran) if ran else None
        row["hit_wall_s"] = statistics.median(hits) if hits else None
        if name in TRAIN_STAGES and ran:
            row["fit_s"] = statistics.median(s["fit_s"] for s in ran)
            row["overhead_s"] = statistics.median(s["wall_s"] - s["fit_s"] for s in ran)
            reference = plain.get(PLAIN_OF[name])
            row["plain"] = PLAIN_OF[name]
            row["wall_over_plain"] = row["wall_s"] / reference if reference else None
            row["fit_over_plain"] = row["fit_s"] / reference if reference else None
        rows.append(row)
    return rows


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict[str, Any]], plain: dict[str, float]) -> str:
    """The summary as a markdown table (pasted into RESULTS.md as is)."""
    lines = [
        "| stage | mode | Airflow task wall s | fit s (model.json) | wall - fit (outside the fit) s "
        "| wall / plain fit | fit / plain fit | checkpoint hit wall s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        reference = ""
        if row.get("plain") and plain.get(row["plain"]):
            reference = f" ({row['plain']} {plain[row['plain']]:.1f} s)"
        lines.append(
            f"| {row['stage']} | {row['mode']} | {_fmt(row['wall_s'])} | {_fmt(row.get('fit_s'))} "
            f"| {_fmt(row.get('overhead_s'))} | {_fmt(row.get('wall_over_plain'), 2)}{reference} "
            f"| {_fmt(row.get('fit_over_plain'), 2)} | {_fmt(row['hit_wall_s'])} |"
        )
    return "\n".join(lines)
