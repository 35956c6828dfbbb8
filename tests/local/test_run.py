"""`dagspec run` end to end in both execution modes: real `airflow dags test` on SQLite, real files.

``connect``: stages are clients of the local Spark Connect server; ``spark``: a spark-submit per
stage. The same pipeline, the same assertions.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dagspec.job.connect_server import answering
from tests.conftest import REPO
from tests.helpers import DAGSPEC

pytestmark = pytest.mark.integration


def _project(mode: str, tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    """A pipelines folder with the demo (no retries, so a killed stage fails fast) and its storage root."""
    base = tmp_path_factory.mktemp(f"run-{mode}")
    pipelines = base / "pipelines"
    pipelines.mkdir()
    demo = (REPO / "pipelines" / "ctr_demo.yaml").read_text()
    (pipelines / "ctr_demo.yaml").write_text(demo.replace("retries: 1, retry_delay: 60", "retries: 0, retry_delay: 1"))
    return {
        "base": base,
        "spec": pipelines / "ctr_demo.yaml",
        "storage": base / "storage",
        "mode": mode,
        "airflow": airflow_home,
    }


# Two fixtures, not one parametrized one: the tests of a mode build on each other's storage, and a
# module fixture parametrized by mode is set up again whenever the test order alternates modes.
@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    """Connect mode: every stage a client of the local Spark Connect server."""
    return _project("connect", tmp_path_factory, airflow_home)


@pytest.fixture(scope="module")
def spark_project(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> dict[str, Any]:
    """spark mode: a spark-submit per stage."""
    return _project("spark", tmp_path_factory, airflow_home)


def env_for(project: dict[str, Path]) -> dict[str, str]:
    # the Connect port is kept: a developer's run of the suite beside another server on 15002
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(project["airflow"]), DAGSPEC_MODE=str(project["mode"]))
    return env


def dagspec_run(project: dict[str, Path], *args: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [DAGSPEC, "run", str(project["spec"]), "--storage-root", str(project["storage"]), *args]
    env = {**env_for(project), **({"DAGSPEC_CONNECT_PORT": str(port)} if port else {})}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)


def manifests(project: dict[str, Path]) -> dict[str, dict]:
    """stage/fingerprint -> committed manifest."""
    found = {}
    for success in (project["storage"] / "ctr_demo").glob("*/*/_SUCCESS"):
        found[f"{success.parent.parent.name}/{success.parent.name}"] = json.loads(
            (success.parent / "manifest.json").read_text()
        )
    return found


def show(project: dict[str, Path], *params: str) -> dict[str, dict]:
    args = [DAGSPEC, "show", str(project["spec"]), "--json", "--storage-root", str(project["storage"])]
    for p in params:
        args += ["-p", p]
    done = subprocess.run(args, env=env_for(project), capture_output=True, text=True, check=True, cwd=REPO)
    return {row["name"]: row for row in json.loads(done.stdout)}


def asset_events(project: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Asset name -> the extra of each event this project's runs emitted, oldest first (Airflow's DB;
    the session's Airflow home is shared, the storage root is this project's)."""
    with sqlite3.connect(Path(project["airflow"]) / "airflow.db") as db:
        rows = db.execute(
            "SELECT a.name, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE e.source_dag_id = 'ctr_demo' ORDER BY e.id"
        ).fetchall()
    found: dict[str, list[dict[str, Any]]] = {}
    for name, text in rows:
        extra = json.loads(text)
        if str(extra.get("checkpoint", "")).startswith(f"{project['storage']}/"):
            found.setdefault(name, []).append(extra)
    return found


def test_first_run_computes_every_stage(project) -> None:
    # spark mode's whole run is the killed-driver test below (and the cluster tests', tests/local/test_cluster.py)
    assert {r["state"] for r in show(project).values()} == {"missing"}
    done = dagspec_run(project)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = show(project)
    assert {r["state"] for r in rows.values()} == {"done"}
    committed = manifests(project)
    assert set(committed) == {f"{name}/{row['fingerprint']}" for name, row in rows.items()}
    balanced = committed[f"balanced/{rows['balanced']['fingerprint']}"]
    assert balanced["metrics"]["class_counts_after"] == {"0": 21, "1": 21}
    assert balanced["inputs"]["data"]["fingerprint"] == rows["raw_checked"]["fingerprint"]  # checked data flows on
    assert committed[f"raw_checked/{rows['raw_checked']['fingerprint']}"]["metrics"]["violations"] == 0
    assert (project["storage"] / "exports" / "out" / "ctr_demo" / "train").is_dir()
    expected_mode = {"connect": "connect", "spark": "spark-submit"}[str(project["mode"])]
    assert {r["mode"] for r in rows.values()} == {expected_mode}
    log = run_log(done)
    assert ("Spark-Submit cmd" in log) == (project["mode"] == "spark")
    assert f"stage balanced: mode: {expected_mode}" in log
    assert "already registered" not in log  # dagspec's UI plugin found once (no leftover egg-info on sys.path)
    # `dagspec run` runs every task in one process: every client was started ahead, the first one by
    # the `dags test` process before it imported Airflow
    clients = re.findall(r"Connect client \((started ahead|started now)", log)
    assert clients == ([] if project["mode"] == "spark" else ["started ahead"] * len(rows))
    masters = {m["spark"]["master"] for m in committed.values()}
    assert masters == ({"spark connect"} if project["mode"] == "connect" else {"local[*]"})
    assert {name: task_outcome(done, name) for name in rows} == {name: "ran" for name in rows}
    assert re.search(r"^ctr_demo: success in [0-9.]+ s; 5 stages: 5 ran, 0 hits$", done.stdout, re.M), done.stdout
    exported = project["storage"] / "exports" / "out" / "ctr_demo" / "train"
    assert re.search(rf"^published \(exports\):\n  train_out +{exported}$", done.stdout, re.M), done.stdout
    # each output's asset event says what its stage made, as its manifest records it
    events = asset_events(project)
    assert {name.split(".")[1] for name in events} == set(rows) - {"train_out"}  # an export has no output asset
    for name, extras in events.items():
        (extra,) = extras
        stage, output = name.split(".")[1:]
        manifest = committed[f"{stage}/{rows[stage]['fingerprint']}"]
        assert extra["fingerprint"] == manifest["fingerprint"] and extra["stage"] == stage
        assert Path(extra["checkpoint"]) == project["storage"] / "ctr_demo" / stage / manifest["fingerprint"] / output
        assert extra.get("rows_out") == (manifest.get("rows") or {}).get(output)
    raw = events["ctr_demo.raw.data"][0]
    assert (
        raw["rows_out"] > 0
        and raw["rows_rejected"] == committed[f"raw/{rows['raw']['fingerprint']}"]["metrics"]["rows_rejected"]
    )
    assert events["ctr_demo.raw_checked.data"][0]["violations"] == 0
    assert events["ctr_demo.split.train"][0]["rows_out"] + events["ctr_demo.split.test"][0]["rows_out"] == 42


def task_outcome(done: subprocess.CompletedProcess[str], stage: str) -> str:
    """`ran` or `hit` (with the checkpoint it found), as `dagspec run` printed it for the stage."""
    match = re.search(rf"^  {stage} +(ran|hit) +[0-9.]+ s(  \S+)?$", done.stdout, re.M)
    assert match, done.stdout
    return match.group(1) + (f" {match.group(2).strip()}" if match.group(2) else "")


def run_log(done: subprocess.CompletedProcess[str]) -> str:
    """The Airflow output of a `dagspec run`, from the log file it names."""
    match = re.search(r"log: (\S+)", done.stdout)
    assert match, done.stdout
    return (REPO / match.group(1)).read_text()


def test_second_run_is_all_checkpoint_hits(project) -> None:
    # hits and fingerprints are decided by the operator before it picks a mode: one mode tests them
    before = manifests(project)
    with socket.socket() as probe:  # a port no Connect server answers on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = dagspec_run(project, port=port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert manifests(project) == before
    # nothing to compute: no Connect server (a JVM) is started for it
    assert "Spark Connect server: not started, every stage's checkpoint is committed\n" in done.stdout
    assert not answering(port)
    log = run_log(done)
    for name, row in show(project).items():
        # the operator's own record: it skipped this stage, and spark-submit never started
        assert f"stage {name} ({row['kind']}, {row['fingerprint']}): done" in log
        assert f"checkpoint hit: {row['output']}; nothing to run" in log
        assert task_outcome(done, name) == f"hit {row['output']}"
    assert "Spark-Submit cmd" not in log
    assert re.search(r"^ctr_demo: success in [0-9.]+ s; 5 stages: 0 ran, 5 hits$", done.stdout, re.M), done.stdout
    # the summary lists the checkpoints from the plan it resolved once (no second resolve)
    rows = show(project)
    listed = done.stdout.split("checkpoints (manifest.json in each", 1)[1].splitlines()[1:6]
    assert listed == [f"  {name:24} {row['output']}" for name, row in rows.items()]
    # a hit emits its asset events too, saying what the run that committed the checkpoint said
    events = asset_events(project)
    assert all(len(extras) == 2 for extras in events.values()), {k: len(v) for k, v in events.items()}
    assert {name: extras[1] for name, extras in events.items()} == {name: extras[0] for name, extras in events.items()}


def test_changing_one_param_reruns_exactly_the_affected_stages(project) -> None:
    before = manifests(project)
    done = dagspec_run(project, "-p", "test_fraction=0.3")
    assert done.returncode == 0, done.stdout + done.stderr
    after = manifests(project)
    new = set(after) - set(before)
    assert {key.split("/")[0] for key in new} == {"split", "train_out"}
    assert {k: after[k] for k in before} == before  # nothing recomputed in place
    split = next(after[k] for k in new if k.startswith("split/"))
    assert split["params"]["fractions"] == {"train": 0.7, "test": 0.3}
    assert {name for name in show(project) if task_outcome(done, name) == "ran"} == {"split", "train_out"}
    assert "; 5 stages: 2 ran, 3 hits\n" in done.stdout
    # at the defaults the export now holds the other run's data: republished, and not called broken
    train_out = show(project)["train_out"]
    published = next(after[k]["fingerprint"] for k in new if k.startswith("train_out/"))
    assert (train_out["state"], train_out["reasons"]) == (
        "missing",
        [
            "published by another run (params: test_fraction=0.3): "
            f"{project['storage']}/exports/out/ctr_demo/train holds fingerprint {published}"
        ],
    )


def _spark_driver_pids(app_name: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", "--", f"--name {app_name}"], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


@pytest.mark.system
def test_a_killed_stage_leaves_nothing_trusted_and_the_rerun_recomputes_only_it(spark_project) -> None:
    # kills a stage's own driver: spark mode (Connect mode's failure is the server's, test_connect_server.py)
    project = spark_project
    # spark mode starts from an empty storage root: this run commits the stages before split with a
    # spark-submit each, then split's driver is killed while it writes
    params = ("-p", "test_fraction=0.4")
    # split's fingerprint is provisional until its upstream stages commit (their content is in its key)
    assert show(project, "test_fraction=0.4")["split"]["provisional"]
    split_dir = project["storage"] / "ctr_demo" / "split"
    cmd = [DAGSPEC, "run", str(project["spec"]), "--storage-root", str(project["storage"]), *params]
    run = subprocess.Popen(
        cmd, env=env_for(project), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO
    )
    killed = False
    deadline = time.time() + 600
    while time.time() < deadline and run.poll() is None:
        if list(split_dir.glob("_tmp-*/train")):  # the attempt has started writing
            for pid in _spark_driver_pids("dagspec.ctr_demo.split"):
                os.kill(pid, signal.SIGKILL)
                killed = True
            if killed:
                break
        time.sleep(0.2)
    output = run.communicate(timeout=600)[0]
    assert killed, output
    assert run.returncode != 0
    assert not list(split_dir.glob("*/_SUCCESS"))
    split = show(project, "test_fraction=0.4")["split"]
    assert split["state"] == "missing" and not split["provisional"]
    before = manifests(project)
    assert {key.split("/")[0] for key in before} == {"raw", "raw_checked", "balanced"}

    done = dagspec_run(project, *params)
    assert done.returncode == 0, done.stdout + done.stderr
    after = manifests(project)
    assert {k: after[k] for k in before} == before
    assert {k.split("/")[0] for k in set(after) - set(before)} == {"split", "train_out"}
    assert not list(split_dir.glob("_tmp-*")), "the rerun cleans up the killed attempt"
    # every stage ran as a spark-submit of its own, on the connection's local[*] master
    rows = show(project, "test_fraction=0.4")
    assert {r["state"] for r in rows.values()} == {"done"} and {r["mode"] for r in rows.values()} == {"spark-submit"}
    assert {m["spark"]["master"] for m in after.values()} == {"local[*]"}
    log = run_log(done)
    assert "Spark-Submit cmd" in log and "stage split: mode: spark-submit" in log


def test_a_missing_spark_connection_fails_with_a_clear_message(spark_project, tmp_path: Path) -> None:
    # found before any mode is chosen: checked once
    project = spark_project
    spec = project["spec"].parent / "no_conn.yaml"
    spec.write_text(
        "spark: {conn_id: dagspec_missing_conn}\nstages:\n  q: {kind: sql, params: {query: 'select 1 as x'}}\n"
    )
    env = env_for(project)
    subprocess.run([DAGSPEC, "init"], env=env, check=True, capture_output=True, cwd=REPO)
    env.update(
        AIRFLOW_HOME=str(project["airflow"]),
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        DAGSPEC_PIPELINES=str(spec.parent),
        DAGSPEC_STORAGE_ROOT=str(tmp_path),
    )
    airflow = str(Path(sys.executable).parent / "airflow")
    done = subprocess.run([airflow, "dags", "test", "no_conn"], env=env, capture_output=True, text=True, timeout=300)
    assert "Airflow connection 'dagspec_missing_conn' does not exist" in done.stdout + done.stderr
    assert not list(tmp_path.glob("no_conn/q/*/_SUCCESS"))
    spec.unlink()
