"""A local Spark standalone cluster (master and workers on 127.0.0.1) as background processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagspec.job.connect_server import spark_env, spark_home
from dagspec.processes import GroupStatus, Service, default_run_dir, json_or_none, start_all, wait_ready
from dagspec.storage import project_home

CLUSTER = "cluster"
MASTER_WEBUI_PORT = 8180  # Spark's default 8080 is Airflow's UI port
SERVICE = Service(CLUSTER, "Spark cluster", "dagspec cluster down")


def cluster_env(run_dir: Path) -> dict[str, str]:
    """Environment of the master and workers (and so of the executors the workers start)."""
    return {
        **spark_env(run_dir),
        "SPARK_WORKER_DIR": str(run_dir / "spark-work"),
        # the REST submission server would take the fixed port 6066 and clash with a second cluster
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }


@dataclass
class ClusterStatus(GroupStatus):
    """What ``cluster_status`` reports; printed by ``dagspec cluster status``."""

    master_url: str | None
    webui_url: str | None
    processes: dict[str, bool]
    alive_workers: int | None
    cores: int | None = None
    memory_mb: int | None = None

    def __str__(self) -> str:
        if not self.processes:
            return "Spark cluster: not running"
        details = [
            f"  master:  {self.master_url}   (web UI {self.webui_url})",
            f"  workers: {self.alive_workers} alive, {self.cores} cores, {self.memory_mb} MB in all",
        ]
        lines = self.state_lines("Spark cluster", "", details)
        lines.append(
            f"  use it: export AIRFLOW_CONN_SPARK_DEFAULT='{self.master_url}'  (then `dagspec run ...`)"
            if self.master_url
            else ""
        )
        return "\n".join(line for line in lines if line)


def _master_json(webui_url: str) -> dict[str, Any] | None:
    data = json_or_none(f"{webui_url}/json/")
    return data if isinstance(data, dict) else None


def cluster_up(
    workers: int = 2,
    cores: int = 1,
    memory: str = "2g",
    port: int = 7077,
    *,
    webui_port: int = MASTER_WEBUI_PORT,
    home: Path | None = None,
    run_dir: Path | None = None,
    timeout: float = 120.0,
) -> ClusterStatus:
    """Start a Spark standalone master and ``workers`` workers on 127.0.0.1; wait until all registered."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    SERVICE.refuse_start(
        run_dir,
        [port, webui_port],
        lambda needed: f"port {needed} on 127.0.0.1 is in use; stop what uses it or pick another port",
    )
    spark_class = str(spark_home() / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    webui_url = f"http://127.0.0.1:{webui_port}"
    env = cluster_env(run_dir)
    master = [
        spark_class, "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui_port),
    ]  # fmt: skip
    specs: list[tuple[str, list[str]]] = [("spark-master", master)]
    for i in range(1, workers + 1):
        work_dir = run_dir / "spark-work" / f"worker-{i}"
        work_dir.mkdir(parents=True, exist_ok=True)
        specs.append(
            (
                f"spark-worker-{i}",
                [
                    spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                    "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                    "--webui-port", "0", "--work-dir", str(work_dir),
                ],
            )
        )  # fmt: skip
    exited = "a Spark process exited while the cluster was starting"
    info = {"master_url": master_url, "webui_url": webui_url, "home": str(home)}
    with SERVICE.starting(run_dir, info) as group:
        # the master first: workers that start before it retry with a back-off that costs seconds
        start_all(group, run_dir, specs[:1], env)
        late = f"the Spark master did not answer on {webui_url} within {timeout:.0f} s"
        wait_ready(
            group,
            run_dir,
            lambda: _master_json(webui_url) is not None,
            timeout,
            exited=exited,
            late=late,
            interval=0.25,
        )
        start_all(group, run_dir, specs[1:], env)

        def registered() -> bool:
            return int((_master_json(webui_url) or {}).get("aliveworkers", 0)) >= workers

        late = f"{workers} workers did not register with {master_url} in {timeout:.0f} s"
        wait_ready(group, run_dir, registered, timeout, exited=exited, late=late)
    return cluster_status(home=home, run_dir=run_dir)


def cluster_status(*, home: Path | None = None, run_dir: Path | None = None) -> ClusterStatus:
    """Which recorded cluster processes run, and what the master reports."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    group = SERVICE.load(run_dir)
    if group is None:
        return ClusterStatus(None, None, {}, None)
    webui_url = str(group.info["webui_url"])
    data = _master_json(webui_url) or {}
    return ClusterStatus(
        master_url=str(group.info["master_url"]),
        webui_url=webui_url,
        processes={p.name: p.running for p in group.processes},
        alive_workers=data.get("aliveworkers"),
        cores=data.get("cores"),
        memory_mb=data.get("memory"),
    )


def cluster_down(*, home: Path | None = None, run_dir: Path | None = None) -> str:
    """Stop the cluster's master and workers (and any executor they started)."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    return SERVICE.stop(run_dir)
