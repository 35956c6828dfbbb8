"""Background processes without Docker: start, record, check and stop process groups.

Every process is started with ``setsid`` (its own session and process group) so that everything it
forks - Spark executors and their Python workers, Airflow's executor workers, task supervisors and
the spark-submits they start - is stopped with it by one signal to the group. The PIDs, process
groups and start times are recorded in ``<home>/.dagspec/run/<group>.json``, each process's output
in ``<home>/.dagspec/run/<name>.log``.

Not the stock scripts: ``sbin/start-master.sh`` loses the process group (``nohup``); ``airflow standalone`` starts 32 executor workers and leaves orphans on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dagspec.errors import DagspecError

STOP_TIMEOUT_S = 30.0
# How long the leader alone gets to end its group before the whole group is signalled: a supervisor
# stops its own children in order (Airflow's triggerer: under a second), where SIGTERM to every
# member at once has it wait out its 10 s escalation delay for a child that is already gone
LEADER_GRACE_S = 5.0

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
    """SIGTERM the leader, then what is left of its process group, SIGKILL the group after
    ``timeout``; True if it had to be killed."""
    if not proc.running and not proc.group_alive():
        _CHILDREN.pop(proc.pid, None)
        return False
    if proc.running and os.getpgid(proc.pid) != proc.pid:
        raise ServiceError(f"{proc.name} (pid {proc.pid}) is not the leader of its process group; not stopping it")
    killed = False
    deadline = time.monotonic() + timeout
    if proc.running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        # until the group is gone, or the leader is (then its leftovers are signalled at once)
        wait_until(lambda: not proc.running or not proc.group_alive(), min(LEADER_GRACE_S, timeout))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    if not wait_until(lambda: not proc.group_alive(), max(0.0, deadline - time.monotonic())):
        killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        wait_until(lambda: not proc.group_alive(), 10.0)
    child = _CHILDREN.pop(proc.pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
    return killed


def own_peak_rss_mb() -> float:
    """This process's peak RSS (MB): ``VmHWM`` from ``/proc/self/status``, else ``ru_maxrss``.

    Not ``ru_maxrss`` first: Linux carries it across fork and exec, so a process started by a
    large parent (a Connect client started by the Airflow task process) reports at least the
    parent's RSS at the fork. ``VmHWM`` belongs to the running program's own memory.
    """
    import resource

    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/self/status").read_text().split("VmHWM:", 1)[1].split()[0]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
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


def json_or_none(url: str, timeout: float = 3.0, **kwargs: Any) -> Any:
    """``http_json``, or None when nothing answers there (yet)."""
    try:
        return http_json(url, timeout, **kwargs)
    except (OSError, ValueError):
        return None


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


def default_run_dir(home: Path) -> Path:
    """$DAGSPEC_RUN_DIR, else ``<home>/.dagspec/run``."""
    return Path(os.environ.get("DAGSPEC_RUN_DIR") or home / ".dagspec" / "run").resolve()


def refuse_if_running(run_dir: Path, group: str, down_hint: str) -> None:
    existing = ServiceGroup.load(run_dir, group)
    if existing is None:
        return
    alive = [p for p in existing.processes if p.running or p.group_alive()]
    if alive:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in alive)
        raise ServiceError(f"the {group} is already running: {names}; stop it first with `{down_hint}`")
    existing.stop(run_dir)  # only stale records: forget them


def start_all(
    group: ServiceGroup, run_dir: Path, specs: Sequence[tuple[str, list[str]]], env: Mapping[str, str]
) -> None:
    """Start each (name, argv) in order, saving the record after each so a crash leaves no orphan."""
    for name, argv in specs:
        group.processes.append(start_process(name, argv, env, run_dir))
        group.save(run_dir)


def fail_and_stop(group: ServiceGroup, run_dir: Path, message: str) -> ServiceError:
    """Stop what was started and build an error that shows the end of each log."""
    logs = "\n".join(f"--- {p.log} (last lines) ---\n{tail(p.log, 15)}" for p in group.processes)
    group.stop(run_dir)
    return ServiceError(f"{message}\n{logs}")


@contextlib.contextmanager
def stopped_on_failure(group: ServiceGroup, run_dir: Path) -> Iterator[ServiceGroup]:
    """Start ``group`` inside this: whatever stops the start (an error, a Ctrl-C) leaves no process behind."""
    try:
        yield group
    except BaseException:  # re-raised: the group's processes are stopped on any way out
        group.stop(run_dir)
        raise


def wait_ready(
    group: ServiceGroup,
    run_dir: Path,
    ready: Callable[[], bool],
    timeout: float,
    *,
    exited: str,
    late: str,
    interval: float = 0.5,
) -> None:
    """Wait until ``ready()``; a process of the group that exits meanwhile (``exited``) or the
    timeout (``late``) stops the group and raises a ServiceError with the end of their logs."""

    def check() -> bool:
        if not all(p.running for p in group.processes):
            raise fail_and_stop(group, run_dir, exited)
        return ready()

    if not wait_until(check, timeout, interval):
        raise fail_and_stop(group, run_dir, late)


def stop_group(run_dir: Path, group: str, title: str) -> str:
    """What ``dagspec <service> down`` prints: each process of the recorded group stopped, or that none runs."""
    found = ServiceGroup.load(run_dir, group)
    if found is None:
        return f"{title}: not running"
    return "\n".join([f"{title} stopped:", *(f"  {line}" for line in found.stop(run_dir))])


@dataclass(frozen=True)
class Service:
    """One local service: its recorded ``group``, its ``title`` in messages, the command that stops it."""

    group: str
    title: str
    down_hint: str

    def refuse_start(self, run_dir: Path, ports: Sequence[int], busy: Callable[[int], str]) -> None:
        """Raise unless it can start: it does not run already, and each port is free (``busy`` says why not)."""
        refuse_if_running(run_dir, self.group, self.down_hint)
        for port in ports:
            if not port_free(port):
                raise ServiceError(busy(port))

    def starting(self, run_dir: Path, info: dict[str, Any]) -> contextlib.AbstractContextManager[ServiceGroup]:
        """A new record of its processes (``info`` kept with it), stopped if the start does not finish."""
        return stopped_on_failure(ServiceGroup(self.group, [], info), run_dir)

    def load(self, run_dir: Path) -> ServiceGroup | None:
        return ServiceGroup.load(run_dir, self.group)

    def stop(self, run_dir: Path) -> str:
        """What ``<down_hint>`` prints (``stop_group``)."""
        return stop_group(run_dir, self.group, self.title)


class GroupStatus:
    """Part of a service group's status: ``processes`` maps each recorded process to whether it runs."""

    processes: dict[str, bool]

    @property
    def up(self) -> bool:
        return bool(self.processes) and all(self.processes.values())

    def process_lines(self) -> list[str]:
        return [f"  {name:16} {'running' if ok else 'DEAD'}" for name, ok in self.processes.items()]

    def state_lines(self, title: str, at: str, details: Sequence[str]) -> list[str]:
        """``title`` up (``at`` a place) or DEGRADED, the ``details`` lines, then each process's state."""
        return [f"{title}: {'up' if self.up else 'DEGRADED'}{at}", *details, *self.process_lines()]


def private_secret(path: Path, what: str, down_hint: str) -> str:
    """The secret kept in ``path``, generated (32 random bytes, base64url, mode 0600) when there is none.

    Refused when the file is readable by others than its owner: a secret others could read no longer
    keeps them out. ``what`` names it in errors; ``down_hint`` is what to stop before deleting it.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
        try:
            os.link(tmp, path)  # atomic, and never over a secret a concurrent start just wrote
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077 or path.stat().st_uid != os.getuid():
        raise ServiceError(
            f"the {what} {path} is readable by others (mode {mode:04o}) or not yours: it no longer "
            f"keeps other users out. Delete it (`{down_hint}` first): the next start generates a new one, mode 0600"
        )
    value = path.read_text().strip()
    if not value:
        raise ServiceError(f"the {what} {path} is empty: delete it, the next start generates a new one")
    return value
