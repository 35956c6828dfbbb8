"""Shipped pipelines on a real Spark standalone cluster (a master and two workers on 127.0.0.1).

The only change from a local run is the connection: AIRFLOW_CONN_SPARK_DEFAULT points at the
cluster's master. Each pipeline then runs through `dagspec run` (the real compiled DAG, real
spark-submits), once on the cluster and once on local[*]; the row counts of every stage must agree,
and the master must have seen one application per stage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagspec.services import ClusterStatus, cluster_down, cluster_up, free_port, http_json, port_free
from dagspec.spec import PipelineSpec, load_spec
from tests.conftest import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.timeout(1800)]

# Small shipped pipelines, physics first; the ones not in pipelines/ (yet) are skipped.
SPECS = ["hep_zz_features", "ctr_demo"]
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
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=1500)


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
def test_pipeline_on_the_cluster_matches_local(name: str, cluster: ClusterStatus, tmp_path: Path) -> None:
    spec_path = _spec_path(name)
    spec = load_spec(spec_path)
    airflow_home = tmp_path / "airflow"

    started = time.monotonic()
    on_cluster = _dagspec_run(spec_path, tmp_path / "cluster", airflow_home, cluster.master_url)
    cluster_s = time.monotonic() - started
    assert on_cluster.returncode == 0, on_cluster.stdout[-3000:] + on_cluster.stderr[-3000:]

    started = time.monotonic()
    local = _dagspec_run(spec_path, tmp_path / "local", airflow_home, None)
    local_s = time.monotonic() - started
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    print(f"{name}: cluster {cluster_s:.1f} s, local[*] {local_s:.1f} s")

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
