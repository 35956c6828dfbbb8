"""The Airflow api-server, scheduler, dag-processor and triggerer on SQLite, as local background processes."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from dagspec.job.connect_server import ensure_server, stop_server
from dagspec.local.airflow_env import airflow_env, ensure_airflow_db, ensure_spark_connection, uses_local_server
from dagspec.local.history import ensure_history, history_down
from dagspec.processes import GroupStatus, Service, default_run_dir, json_or_none, start_all, wait_ready
from dagspec.spark_history import DEFAULT_PORT as HISTORY_PORT
from dagspec.spark_history import HISTORY_URL_ENV, local_history
from dagspec.spec.roots import STORAGE_ROOT_ENV, deployment_storage_root
from dagspec.storage import project_home

AIRFLOW = "airflow"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
DEFAULT_PORT = 8080
SERVICE = Service(AIRFLOW, "Airflow", "dagspec airflow down")


def airflow_environment(home: Path, port: int, parallelism: int) -> dict[str, str]:
    """The CLI's local Airflow environment (same AIRFLOW_HOME, DB and connections) plus the servers' settings."""
    env = airflow_env(home)
    # creates airflow.cfg before any server starts: its generated JWT secret must be one for all
    ensure_airflow_db(env)
    ensure_spark_connection(env, "spark_default")
    base_url = f"http://127.0.0.1:{port}"
    env.update(
        {
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(parallelism),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": base_url,
            "AIRFLOW__API__WORKERS": "1",
            # task supervisors report to this; Airflow's default assumes port 8080
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
            # the default 5 s fails tasks at start ("httpx.ReadTimeout") while SQLite is busy on a
            # loaded 2-core machine; a slow answer is better than a failed attempt
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            # no crawl of the whole repo for DAG files: only dags/ is a DAG folder
            "AIRFLOW__CORE__DAG_DISCOVERY_SAFE_MODE": "False",
            # the deployment's storage root, said explicitly: every task writes there and the results
            # view serves from it, whatever a spec's storage.root says (dagspec.spec.roots)
            STORAGE_ROOT_ENV: deployment_storage_root(home),
        }
    )
    return {**os.environ, **env}


@dataclass
class AirflowStatus(GroupStatus):
    """What ``airflow_status`` reports; printed by ``dagspec airflow up|status``."""

    url: str | None
    airflow_home: str | None
    processes: dict[str, bool]
    health: dict[str, str] = field(default_factory=dict)
    history: str = ""  # the Spark History Server's status, as `airflow up` left it

    @property
    def password_file(self) -> str | None:
        return str(Path(self.airflow_home) / PASSWORD_FILE) if self.airflow_home else None

    def __str__(self) -> str:
        if not self.processes:
            return "Airflow: not running"
        details = [f"  login: admin, password in {self.password_file}", f"  AIRFLOW_HOME: {self.airflow_home}"]
        lines = self.state_lines("Airflow", f" at {self.url}", details)
        if self.health:
            lines.append("  health: " + ", ".join(f"{k}={v}" for k, v in self.health.items()))
        if self.history:
            lines.append(self.history)
        return "\n".join(lines)


def airflow_health(url: str) -> dict[str, str]:
    """Component -> status from ``/api/v2/monitor/health`` (empty when the server does not answer)."""
    data = json_or_none(f"{url}/api/v2/monitor/health")
    if data is None:
        return {}
    return {name: str((value or {}).get("status")) for name, value in data.items() if isinstance(value, dict)}


def airflow_up(
    port: int = DEFAULT_PORT,
    *,
    parallelism: int = 2,
    home: Path | None = None,
    run_dir: Path | None = None,
    timeout: float = 180.0,
    history_port: int = HISTORY_PORT,
) -> AirflowStatus:
    """Start api-server (UI on 127.0.0.1:``port``), scheduler, dag-processor and triggerer (it runs the
    watchers of ``schedule: {files: ...}``); wait until healthy."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    SERVICE.refuse_start(
        run_dir,
        [port],
        lambda port: (
            f"port {port} on 127.0.0.1 is in use (Airflow's UI and API would listen there); "
            f"stop what uses it or pick another port: dagspec airflow up --port N"
        ),
    )
    env = airflow_environment(home, port, parallelism)
    if uses_local_server(env, "spark_default"):
        ensure_server(home, run_dir)  # before the scheduler: a first task must not wait for its start
    history_line = ensure_history(home, run_dir, history_port)  # the tasks' "Spark UI" links open it
    found = local_history(home, run_dir)
    if found is not None:  # where dagspec's view finds it (the key: the project's key file)
        env[HISTORY_URL_ENV] = found.url
    airflow = str(Path(sys.executable).parent / "airflow")
    url = f"http://127.0.0.1:{port}"
    specs = [
        ("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]),
        ("scheduler", [airflow, "scheduler"]),
        ("dag-processor", [airflow, "dag-processor"]),
        ("triggerer", [airflow, "triggerer"]),
    ]
    info = {"url": url, "airflow_home": env["AIRFLOW_HOME"], "home": str(home)}
    with SERVICE.starting(run_dir, info) as group:
        start_all(group, run_dir, specs, env)

        def healthy() -> bool:
            health = airflow_health(url)
            return all(health.get(c) == "healthy" for c in ("metadatabase", "scheduler", "dag_processor", "triggerer"))

        wait_ready(
            group,
            run_dir,
            healthy,
            timeout,
            exited="an Airflow process exited while starting",
            late=f"Airflow at {url} was not healthy within {timeout:.0f} s",
            interval=1.0,
        )
    status = airflow_status(home=home, run_dir=run_dir)
    status.history = history_line
    return status


def airflow_status(*, home: Path | None = None, run_dir: Path | None = None) -> AirflowStatus:
    """Which recorded Airflow processes run, and what the health endpoint says."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    group = SERVICE.load(run_dir)
    if group is None:
        return AirflowStatus(None, None, {})
    url = str(group.info["url"])
    return AirflowStatus(
        url=url,
        airflow_home=str(group.info["airflow_home"]),
        processes={p.name: p.running for p in group.processes},
        health=airflow_health(url),
    )


def airflow_down(*, home: Path | None = None, run_dir: Path | None = None) -> str:
    """Stop the api-server, scheduler, dag-processor and triggerer, with every task process they started."""
    home = home or project_home()
    run_dir = run_dir or default_run_dir(home)
    stopped = SERVICE.stop(run_dir)
    return f"{stopped}\n{history_down(home=home, run_dir=run_dir)}\n{stop_server(home, run_dir)}"
