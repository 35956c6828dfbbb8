"""Local background services without Docker: a Spark standalone cluster and the Airflow components.

Every process is started with ``setsid`` (its own session and process group) so that everything it
forks - Spark executors and their Python workers, Airflow's executor workers, task supervisors and
the spark-submits they start - is stopped with it by one signal to the group. The PIDs, process
groups and start times are recorded in ``<home>/.dagspec/run/<group>.json``, each process's output
in ``<home>/.dagspec/run/<name>.log``.

Why not the stock scripts: ``sbin/start-master.sh`` daemonizes through ``nohup`` and loses the
process group, and ``airflow standalone`` starts 32 executor workers and leaves orphans on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dagspec.errors import DagspecError

CLUSTER = "cluster"
AIRFLOW = "airflow"
MASTER_WEBUI_PORT = 8180  # Spark's default 8080 is Airflow's UI port
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
STOP_TIMEOUT_S = 30.0

# Popen objects of the processes this Python process started, by PID: they must be waited for
# (reaped) after they die, else they stay zombies and still count as members of their group.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ServiceError(DagspecError):
    """A local service could not be started, checked or stopped."""


# --- processes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceProcess:
    """One background process: its PID is also its process group id (it was started with setsid)."""

    name: str
    pid: int
    start_ticks: int  # field 22 of /proc/<pid>/stat: tells our process from a later one with its PID
    argv: list[str]
    log: str

    @property
    def running(self) -> bool:
        """Is this very process (not a later one that reuses its PID) alive and not a zombie?"""
        child = _CHILDREN.get(self.pid)
        if child is not None and child.poll() is not None:
            return False
        stat = _proc_stat(self.pid)
        return stat is not None and stat[0] != "Z" and stat[1] == self.start_ticks

    def group_alive(self) -> bool:
        """Does any process of its group still run (the leader may be gone, its children not)?"""
        child = _CHILDREN.get(self.pid)
        if child is not None:
            child.poll()  # reap a dead leader so that it stops counting as a member
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _group_has_live_members(self.pid)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a process, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may contain spaces and ')'
    return fields[0], int(fields[19])


def _group_has_live_members(pgid: int) -> bool:
    """True if a non-zombie process of group ``pgid`` exists (zombies answer kill(0) too)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def start_process(name: str, argv: Sequence[str], env: Mapping[str, str], run_dir: Path) -> ServiceProcess:
    """Start ``argv`` in a new session (setsid), output appended to ``<run_dir>/<name>.log``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / f"{name}.log"
    with log.open("ab") as out:
        child = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=env.get("DAGSPEC_HOME") or None,
        )
    _CHILDREN[child.pid] = child
    stat = _proc_stat(child.pid)
    return ServiceProcess(name=name, pid=child.pid, start_ticks=stat[1] if stat else -1, argv=list(argv), log=str(log))


def stop_process(proc: ServiceProcess, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM the process group, SIGKILL it after ``timeout``; True if it had to be killed."""
    if not proc.running and not proc.group_alive():
        _CHILDREN.pop(proc.pid, None)
        return False
    if proc.running and os.getpgid(proc.pid) != proc.pid:
        raise ServiceError(f"{proc.name} (pid {proc.pid}) is not the leader of its process group; not stopping it")
    killed = False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    if not _wait(lambda: not proc.group_alive(), timeout):
        killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        _wait(lambda: not proc.group_alive(), 10.0)
    child = _CHILDREN.pop(proc.pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
    return killed


def _wait(condition: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Can ``host:port`` be bound right now?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers do: connections in TIME_WAIT from a previous run must not count as "in use"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel reports free (for tests and for Spark workers' web UIs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def http_json(url: str, timeout: float = 5.0, **kwargs: Any) -> Any:
    """GET (or POST with ``data``) a JSON document; raises OSError/ValueError when unreachable."""
    request = urllib.request.Request(url, **kwargs)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def tail(path: str | Path, lines: int = 30) -> str:
    """The last lines of a log file, for error messages."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- recorded state --------------------------------------------------------------------------------


@dataclass
class ServiceGroup:
    """What ``<run_dir>/<group>.json`` records about a started group of processes."""

    group: str
    processes: list[ServiceProcess]
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / f"{self.group}.json"
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, run_dir: Path, group: str) -> ServiceGroup | None:
        path = run_dir / f"{group}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(group=group, processes=[ServiceProcess(**p) for p in data["processes"]], info=data.get("info", {}))

    def stop(self, run_dir: Path) -> list[str]:
        """Stop every process, last started first; forget the group. Returns one line per process."""
        lines = []
        for proc in reversed(self.processes):
            was_running = proc.running or proc.group_alive()
            killed = stop_process(proc)
            state = "killed (SIGKILL)" if killed else "stopped" if was_running else "was not running"
            lines.append(f"{proc.name} (pid {proc.pid}): {state}")
        (run_dir / f"{self.group}.json").unlink(missing_ok=True)
        return lines


def default_home() -> Path:
    """The project directory: $DAGSPEC_HOME, else the current directory (as the CLI)."""
    return Path(os.environ.get("DAGSPEC_HOME") or os.getcwd()).resolve()


def default_run_dir(home: Path) -> Path:
    """$DAGSPEC_RUN_DIR, else ``<home>/.dagspec/run``."""
    return Path(os.environ.get("DAGSPEC_RUN_DIR") or home / ".dagspec" / "run").resolve()


def _refuse_if_running(run_dir: Path, group: str, down_hint: str) -> None:
    existing = ServiceGroup.load(run_dir, group)
    if existing is None:
        return
    alive = [p for p in existing.processes if p.running or p.group_alive()]
    if alive:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in alive)
        raise ServiceError(f"the {group} is already running: {names}; stop it first with `{down_hint}`")
    existing.stop(run_dir)  # only stale records: forget them


def _start_all(
    group: ServiceGroup, run_dir: Path, specs: Sequence[tuple[str, list[str]]], env: Mapping[str, str]
) -> None:
    """Start each (name, argv) in order, saving the record after each so a crash leaves no orphan."""
    for name, argv in specs:
        group.processes.append(start_process(name, argv, env, run_dir))
        group.save(run_dir)


def _fail(group: ServiceGroup, run_dir: Path, message: str) -> ServiceError:
    """Stop what was started and build an error that shows the end of each log."""
    logs = "\n".join(f"--- {p.log} (last lines) ---\n{tail(p.log, 15)}" for p in group.processes)
    group.stop(run_dir)
    return ServiceError(f"{message}\n{logs}")


# --- the Spark standalone cluster ------------------------------------------------------------------


def spark_home() -> Path:
    """The pyspark package directory: it carries bin/spark-class and the jars of a full Spark."""
    import importlib.util

    found = importlib.util.find_spec("pyspark")
    if found is None or found.origin is None:
        raise ServiceError("pyspark is not installed in this environment")
    return Path(found.origin).parent


def spark_env(run_dir: Path) -> dict[str, str]:
    """Environment of the master and workers (and so of the executors the workers start)."""
    python = sys.executable
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        # executors start Python workers with this; the system python has no pandas/pyarrow
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", python),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", python),
        # else Spark binds and advertises the machine's external interface
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(run_dir),
        "SPARK_WORKER_DIR": str(run_dir / "spark-work"),
        # the REST submission server would take the fixed port 6066 and clash with a second cluster
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@dataclass
class ClusterStatus:
    """What ``cluster_status`` reports; printed by ``dagspec cluster status``."""

    master_url: str | None
    webui_url: str | None
    processes: dict[str, bool]
    alive_workers: int | None
    cores: int | None = None
    memory_mb: int | None = None

    @property
    def up(self) -> bool:
        return bool(self.processes) and all(self.processes.values())

    def __str__(self) -> str:
        if not self.processes:
            return "Spark cluster: not running"
        lines = [f"Spark cluster: {'up' if self.up else 'DEGRADED'}"]
        lines.append(f"  master:  {self.master_url}   (web UI {self.webui_url})")
        lines.append(f"  workers: {self.alive_workers} alive, {self.cores} cores, {self.memory_mb} MB in all")
        lines += [f"  {name:16} {'running' if ok else 'DEAD'}" for name, ok in self.processes.items()]
        lines.append(
            f"  use it: export AIRFLOW_CONN_SPARK_DEFAULT='{self.master_url}'  (then `dagspec run ...`)"
            if self.master_url
            else ""
        )
        return "\n".join(line for line in lines if line)


def _master_json(webui_url: str) -> dict[str, Any] | None:
    try:
        data = http_json(f"{webui_url}/json/", timeout=3)
    except (OSError, ValueError):
        return None
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
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    _refuse_if_running(run_dir, CLUSTER, "dagspec cluster down")
    for needed in (port, webui_port):
        if not port_free(needed):
            raise ServiceError(f"port {needed} on 127.0.0.1 is in use; stop what uses it or pick another port")
    spark_class = str(spark_home() / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    webui_url = f"http://127.0.0.1:{webui_port}"
    env = spark_env(run_dir)
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
    group = ServiceGroup(CLUSTER, [], {"master_url": master_url, "webui_url": webui_url, "home": str(home)})
    try:
        # the master first: workers that start before it retry with a back-off that costs seconds
        _start_all(group, run_dir, specs[:1], env)
        if not _wait(lambda: _master_json(webui_url) is not None or not group.processes[0].running, timeout):
            raise _fail(group, run_dir, f"the Spark master did not answer on {webui_url} within {timeout:.0f} s")
        _start_all(group, run_dir, specs[1:], env)

        def registered() -> bool:
            data = _master_json(webui_url) or {}
            if not all(p.running for p in group.processes):
                raise _fail(group, run_dir, "a Spark process exited while the cluster was starting")
            return int(data.get("aliveworkers", 0)) >= workers

        if not _wait(registered, timeout, interval=0.5):
            raise _fail(group, run_dir, f"{workers} workers did not register with {master_url} in {timeout:.0f} s")
    except BaseException:
        group.stop(run_dir)  # a KeyboardInterrupt mid-start must not leave JVMs behind
        raise
    return cluster_status(home=home, run_dir=run_dir)


def cluster_status(*, home: Path | None = None, run_dir: Path | None = None) -> ClusterStatus:
    """Which recorded cluster processes run, and what the master reports."""
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, CLUSTER)
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
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, CLUSTER)
    if group is None:
        return "Spark cluster: not running"
    return "\n".join(["Spark cluster stopped:", *(f"  {line}" for line in group.stop(run_dir))])


# --- Airflow: api-server, scheduler, dag-processor on SQLite ---------------------------------------


def airflow_environment(home: Path, port: int, parallelism: int) -> dict[str, str]:
    """The CLI's local Airflow environment (same AIRFLOW_HOME, DB and connections) plus the servers' settings."""
    from dagspec.cli import airflow_env, ensure_airflow_db, ensure_spark_connection

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
        }
    )
    return {**os.environ, **env}


@dataclass
class AirflowStatus:
    """What ``airflow_status`` reports; printed by ``dagspec airflow up|status``."""

    url: str | None
    airflow_home: str | None
    processes: dict[str, bool]
    health: dict[str, str] = field(default_factory=dict)

    @property
    def password_file(self) -> str | None:
        return str(Path(self.airflow_home) / PASSWORD_FILE) if self.airflow_home else None

    @property
    def up(self) -> bool:
        return bool(self.processes) and all(self.processes.values())

    def __str__(self) -> str:
        if not self.processes:
            return "Airflow: not running"
        lines = [f"Airflow: {'up' if self.up else 'DEGRADED'} at {self.url}"]
        lines.append(f"  login: admin, password in {self.password_file}")
        lines.append(f"  AIRFLOW_HOME: {self.airflow_home}")
        lines += [f"  {name:16} {'running' if ok else 'DEAD'}" for name, ok in self.processes.items()]
        if self.health:
            lines.append("  health: " + ", ".join(f"{k}={v}" for k, v in self.health.items()))
        return "\n".join(lines)


def airflow_health(url: str) -> dict[str, str]:
    """Component -> status from ``/api/v2/monitor/health`` (empty when the server does not answer)."""
    try:
        data = http_json(f"{url}/api/v2/monitor/health", timeout=3)
    except (OSError, ValueError):
        return {}
    return {name: str((value or {}).get("status")) for name, value in data.items() if isinstance(value, dict)}


def airflow_up(
    port: int = 8080,
    *,
    parallelism: int = 2,
    home: Path | None = None,
    run_dir: Path | None = None,
    timeout: float = 180.0,
) -> AirflowStatus:
    """Start api-server (UI on 127.0.0.1:``port``), scheduler and dag-processor; wait until healthy."""
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    _refuse_if_running(run_dir, AIRFLOW, "dagspec airflow down")
    if not port_free(port):
        raise ServiceError(f"port {port} on 127.0.0.1 is in use; stop what uses it or pick another port")
    env = airflow_environment(home, port, parallelism)
    airflow = str(Path(sys.executable).parent / "airflow")
    url = f"http://127.0.0.1:{port}"
    specs = [
        ("api-server", [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]),
        ("scheduler", [airflow, "scheduler"]),
        ("dag-processor", [airflow, "dag-processor"]),
    ]
    group = ServiceGroup(AIRFLOW, [], {"url": url, "airflow_home": env["AIRFLOW_HOME"], "home": str(home)})
    try:
        _start_all(group, run_dir, specs, env)

        def healthy() -> bool:
            if not all(p.running for p in group.processes):
                raise _fail(group, run_dir, "an Airflow process exited while starting")
            health = airflow_health(url)
            return all(health.get(c) == "healthy" for c in ("metadatabase", "scheduler", "dag_processor"))

        if not _wait(healthy, timeout, interval=1.0):
            raise _fail(group, run_dir, f"Airflow at {url} was not healthy within {timeout:.0f} s")
    except BaseException:
        group.stop(run_dir)
        raise
    return airflow_status(home=home, run_dir=run_dir)


def airflow_status(*, home: Path | None = None, run_dir: Path | None = None) -> AirflowStatus:
    """Which recorded Airflow processes run, and what the health endpoint says."""
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, AIRFLOW)
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
    """Stop the api-server, scheduler and dag-processor, with every task process they started."""
    home = home or default_home()
    run_dir = run_dir or default_run_dir(home)
    group = ServiceGroup.load(run_dir, AIRFLOW)
    if group is None:
        return "Airflow: not running"
    return "\n".join(["Airflow stopped:", *(f"  {line}" for line in group.stop(run_dir))])
