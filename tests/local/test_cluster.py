"""Shipped pipelines on a real Spark standalone cluster (a master and two workers on 127.0.0.1).

The only change from a local run is the connection: AIRFLOW_CONN_SPARK_DEFAULT points at the
cluster's master. Each pipeline then runs through `dagspec run` on the cluster (the real compiled
DAG, real spark-submits) and, as the reference, stage by stage in a local session; the fingerprints
and row counts of every stage must agree, and the master must have seen one application per stage.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagspec.local.cluster import ClusterStatus, cluster_down, cluster_up
from dagspec.processes import free_port, http_json, port_free
from dagspec.spec.loader import load_spec
from dagspec.spec.models import PipelineSpec
from tests.conftest import REPO
from tests.helpers import run_pipeline_in_process, run_stages

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.system, pytest.mark.timeout(3600)]

# Small shipped pipelines, physics first; the ones not in pipelines/ (yet) are skipped.
SPECS = ["hep_zz_features"]  # the small physics ingestion; ctr_demo adds minutes and no new path
WORKER_MEMORY_MB = 2048  # the "~2 GB per worker"


def _memory_mb(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmgt]?)b?", text.strip().lower()).groups()  # type: ignore[union-attr]
    return int(number) * {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024, "": 1 / (1024 * 1024)}[unit]


def _executor_memory_mb(spec: PipelineSpec) -> int:
    """The most executor memory any stage asks for: a worker offering less never runs it."""
    sizes = [WORKER_MEMORY_MB]
    for stage in spec.stages.values():
        resources = spec.spark.resources.merged(stage.spark.resources if stage.spark else None)
        if resources.executor_memory:
            sizes.append(_memory_mb(resources.executor_memory))
    return max(sizes)


def _spec_path(name: str) -> Path:
    path = REPO / "pipelines" / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"pipelines/{name}.yaml is not shipped yet")
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStatus]:
    """A master and two 1-core workers, stopped (with every executor) whatever happens."""
    specs = [load_spec(p) for p in (REPO / "pipelines" / f"{n}.yaml" for n in SPECS) if p.exists()]
    memory = max([WORKER_MEMORY_MB, *(_executor_memory_mb(s) for s in specs)])
    run_dir = tmp_path_factory.mktemp("cluster-run")
    port = 7077 if port_free(7077) else free_port()  # a developer's own cluster may hold 7077
    started = time.monotonic()
    try:
        status = cluster_up(workers=2, cores=1, memory=f"{memory}m", port=port, webui_port=free_port(), run_dir=run_dir)
        print(f"cluster up in {time.monotonic() - started:.1f} s: {status.master_url}")
        assert status.up and status.alive_workers == 2 and status.cores == 2
        yield status
    finally:
        print(cluster_down(run_dir=run_dir))
    leftovers = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True).stdout.split()
    assert leftovers == [], f"processes of the cluster survived cluster_down: {leftovers}"


def _dagspec_run(spec: Path, storage: Path, airflow_home: Path, master: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW_CONN_SPARK_DEFAULT"}
    env.update({"DAGSPEC_HOME": str(REPO), "DAGSPEC_AIRFLOW_HOME": str(airflow_home)})
    env.pop("DAGSPEC_STORAGE_ROOT", None)
    if master:
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = master  # the one thing that differs from a local run
    command = [str(Path(sys.executable).parent / "dagspec"), "run", str(spec), "--storage-root", str(storage)]
    return _run_as_group(command, env, timeout=1500)


def _run_as_group(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run in a new process group; on timeout stop the whole group, not only the direct child.

    `dagspec run` starts `airflow dags test`, which starts spark-submit: killing just the first
    would leave the others running.
    """
    proc = subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        raise AssertionError(f"{command} did not finish in {timeout:.0f} s:\n{out[-3000:]}\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _stage_rows(spec: Path, storage: Path) -> dict[str, dict[str, Any]]:
    """stage -> (fingerprint, rows per output) read from the committed manifests."""
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "dagspec"), "show", str(spec), "--json", "--storage-root", str(storage)],
        env={**os.environ, "DAGSPEC_HOME": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = {}
    for row in json.loads(shown.stdout):
        assert row["state"] == "done", row
        manifest = json.loads((Path(row["output"]) / "manifest.json").read_text())
        result[row["name"]] = {"fingerprint": row["fingerprint"], "rows": manifest["rows"]}
    return result


@pytest.mark.parametrize("name", SPECS)
def test_pipeline_on_the_cluster_matches_local(
    name: str,
    cluster: ClusterStatus,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    airflow_home: Path,
) -> None:
    spec_path = _spec_path(name)
    spec = load_spec(spec_path)

    started = time.monotonic()
    on_cluster = _dagspec_run(spec_path, tmp_path / "cluster", airflow_home, cluster.master_url)
    cluster_s = time.monotonic() - started
    assert on_cluster.returncode == 0, on_cluster.stdout[-3000:] + on_cluster.stderr[-3000:]

    # the reference: the same stage functions in a local session (the Airflow path of a local run
    # is the integration tests' business; a second `dagspec run` here cost ~4 minutes)
    started = time.monotonic()
    monkeypatch.setenv("DAGSPEC_HOME", str(REPO))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "local"))
    run_pipeline_in_process(spark, spec)
    print(f"{name}: cluster {cluster_s:.1f} s, local in-process {time.monotonic() - started:.1f} s")

    # every stage was an application of this master, not a silent local or YARN run
    assert cluster.webui_url is not None
    apps = http_json(f"{cluster.webui_url}/json/")["completedapps"]
    ran = {app["name"]: app["state"] for app in apps}
    for stage in spec.stages:
        assert ran.get(f"dagspec.{spec.dag_id}.{stage}") == "FINISHED", f"{stage} did not run on the cluster: {ran}"

    cluster_rows = _stage_rows(spec_path, tmp_path / "cluster")
    local_rows = _stage_rows(spec_path, tmp_path / "local")
    assert cluster_rows == local_rows  # same fingerprints, same row counts per output
    assert all(sum(s["rows"].values()) > 0 for s in cluster_rows.values() if s["rows"])


TRAINING_SPEC = """\
# The distributed trainers on the cluster: each needs one barrier task per worker (2 slots).
dag_id: cluster_training
description: 2-worker Keras (barrier tasks) and 2-worker SparkXGB on a standalone cluster
storage: {root: .dagspec/storage}
spark:
  conn_id: spark_default
  conf: {spark.sql.shuffle.partitions: 2}
  resources: {driver_memory: 1g, executor_memory: 1g, executor_cores: 1}
stages:
  events:
    kind: generate_physics_events
    params: {events: 400, seed: 42, partitions: 2, max_particles: 20}
  features:
    kind: topology_features
    inputs: {data: events}
    params: {max_particles: 10}
  keras:
    kind: train_keras
    inputs: {train: features}
    params: {architecture: hlf_dense, epochs: 1, batch_size: 64, workers: 2}
  criteo:
    kind: read
    params: {format: tsv, path: "%s", schema: criteo}
  as_is:
    kind: ctr_features
    inputs: {data: criteo}
    params: {mode: as_is}
  xgb:
    kind: train_xgboost
    inputs: {train: as_is}
    params: {workers: 2, num_round: 5, checkpoint_every: 5}
"""


def test_two_worker_keras_and_sparkxgb_train_on_the_cluster(
    cluster: ClusterStatus, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_home: Path
) -> None:
    from tests.conftest import CRITEO_SAMPLE

    spec_path = tmp_path / "pipelines" / "cluster_training.yaml"
    spec_path.parent.mkdir()
    spec_path.write_text(TRAINING_SPEC % CRITEO_SAMPLE)
    # The data stages run on the cluster in the test above; here they are committed by a local
    # session and the cluster run finds them done (the master is not part of a checkpoint's key):
    # the cluster runs the two distributed trainers only.
    monkeypatch.setenv("DAGSPEC_HOME", str(REPO))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "storage"))
    spec = load_spec(spec_path)
    prepared = ("events", "features", "criteo", "as_is")
    plan = run_stages(spark, spec, prepared)
    started = time.monotonic()
    done = _dagspec_run(spec_path, tmp_path / "storage", airflow_home, cluster.master_url)
    print(f"cluster_training: {time.monotonic() - started:.1f} s on the cluster")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (REPO / done.stdout.split("log: ")[1].split()[0]).read_text()
    for name in prepared:
        assert f"checkpoint hit: {plan[name].checkpoint_dir}; nothing to run" in log
    assert cluster.webui_url is not None
    ran = {app["name"]: app for app in http_json(f"{cluster.webui_url}/json/")["completedapps"]}
    for stage in ("keras", "xgb"):
        app = ran[f"dagspec.cluster_training.{stage}"]
        assert app["state"] == "FINISHED" and app["cores"] == 2, app  # both workers' slots
        shown = subprocess.run(
            [str(Path(sys.executable).parent / "dagspec"), "show", str(spec_path), "--json"],
            env={**os.environ, "DAGSPEC_HOME": str(REPO), "DAGSPEC_STORAGE_ROOT": str(tmp_path / "storage")},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        row = next(r for r in json.loads(shown.stdout) if r["name"] == stage)
        manifest = json.loads((Path(row["output"]) / "manifest.json").read_text())
        assert manifest["spark"]["master"] == cluster.master_url
        model = json.loads((Path(row["output"]) / "model" / "model.json").read_text())
        assert model["params"].get("workers", 2) == 2
