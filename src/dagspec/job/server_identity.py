"""Whose Spark Connect server answers on a port: the identity dagspec records when it starts one.

A Connect server's Python workers run the kinds' UDFs with the code of the server's venv, and keep
the modules they imported (``spark.python.worker.reuse``). A stage's checkpoint fingerprint hashes
this checkout's code, so a server is used only when it runs this very code: started for this
project (``DAGSPEC_HOME``), with this venv, from dagspec code with the same hash.

The identity is recorded twice when dagspec starts a server:

- in its run file (``<run_dir>/connect.json``, the ``info`` of its service group), which says
  whether a server is ours;
- in an identity file per port, ``$XDG_RUNTIME_DIR/dagspec/connect-<port>.json`` (else
  ``<tmp>/dagspec-<uid>/connect-<port>.json``): per user and machine, as the port is; written at
  start, removed at stop. It says whose a server is when it is not ours (another checkout's), and
  where the run file of a server started with another run folder lies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dagspec

IDENTITY_KEYS = ("project", "venv", "python", "code_hash")
# dagspec's packages above the kinds (see ``code_hash``): no Python worker imports them
NOT_IN_WORKERS = ("airflow", "job", "local", "plan", "spec")


@dataclass(frozen=True)
class ServerIdentity:
    """What makes a server ours: the project, the venv its Python workers use and the code they import."""

    project: str
    venv: str
    python: str
    code_hash: str

    @classmethod
    def current(cls, home: Path) -> ServerIdentity:
        """The identity a server started now, by this process, for ``home`` would have."""
        return cls(
            project=str(Path(home).resolve()),
            venv=str(Path(sys.prefix).resolve()),
            python=os.environ.get("PYSPARK_PYTHON", sys.executable),
            code_hash=code_hash(home),
        )

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> ServerIdentity | None:
        """The identity in a run file's or identity file's record; None when it has none (older records)."""
        if not all(isinstance(info.get(key), str) for key in IDENTITY_KEYS):
            return None
        return cls(**{key: str(info[key]) for key in IDENTITY_KEYS})

    def as_info(self) -> dict[str, str]:
        return asdict(self)

    def owner(self) -> str:
        """Who started it, for messages: ``/other/checkout with /other/.venv``."""
        return f"{self.project} with {self.venv}"


def code_hash(home: Path) -> str:
    """A hash of the code a server's Python worker can import from the server's environment: dagspec's
    ``.py`` files but those of the layers above the kinds. A plugin kind's module is not in it: each
    stage sends that module with its session (``addArtifacts`` in ``dagspec.job.main``), so the
    workers of that session import the stage's own copy.

    A worker imports what the kinds' functions (pickled by reference) import; the import-linter
    contract "Kinds never import the layers that run them" keeps ``NOT_IN_WORKERS`` out of that, so
    an edit there (the planner, the CLI, the operator) does not restart the server. Files are read
    in full, not judged by modification time: exact, for a few ms a stage start (measured: 66 files,
    0.38 MB, 4-6 ms, 15 ms on a busy 2-core machine; the whole package, 100 files, 12-22 ms).
    """
    digest = hashlib.sha256()
    package = Path(dagspec.__file__).parent
    for label, base in (("dagspec", package),):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            relative = path.relative_to(base)
            if "__pycache__" in relative.parts or (base == package and relative.parts[0] in NOT_IN_WORKERS):
                continue
            with contextlib.suppress(OSError):  # a file removed while we walk
                digest.update(f"{label}/{relative}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# --- the identity file per port ------------------------------------------------------------------


def identity_dir() -> Path:
    """The per-user folder of the identity files: a fixed place (not $TMPDIR or $XDG_RUNTIME_DIR,
    which differ between a login shell and a service), as every process of the user must find it."""
    return Path("/tmp") / f"dagspec-{os.getuid()}"


def identity_path(port: int) -> Path:
    return identity_dir() / f"connect-{port}.json"


def write_identity(port: int, identity: ServerIdentity, pid: int, start_ticks: int, run_dir: Path) -> None:
    """Record who started the server of ``port`` (its process and run folder too)."""
    folder = identity_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = {**identity.as_info(), "pid": pid, "start_ticks": start_ticks, "run_dir": str(run_dir)}
    tmp = folder / f".connect-{port}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(identity_path(port))


def read_identity(port: int) -> dict[str, Any] | None:
    """The identity file of ``port``, if this user's and readable."""
    path = identity_path(port)
    try:
        if path.stat().st_uid != os.getuid():  # a shared temp folder: only our own records count
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remove_identity(port: int, pid: int) -> None:
    """Forget the identity file of ``port`` when it describes process ``pid``."""
    record = read_identity(port)
    if record is not None and record.get("pid") == pid:
        identity_path(port).unlink(missing_ok=True)


# --- who listens ---------------------------------------------------------------------------------


def _listening_sockets(port: int, tables: tuple[str, ...] = ("tcp6", "tcp")) -> set[str]:
    """``socket:[inode]`` of every TCP socket listening on ``port`` (a JVM binds 127.0.0.1 as IPv6-mapped).

    Each table costs ~4 ms to read here (the kernel formats it), so callers may ask for one.
    """
    found = set()
    for table in tables:
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(f"socket:[{fields[9]}]")
    return found


def _holds(pid: int, sockets: set[str]) -> bool:
    try:
        with os.scandir(f"/proc/{pid}/fd") as fds:
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) in sockets:
                        return True
    except OSError:  # gone, or another user's
        return False
    return False


def _pids(pgid: int | None = None) -> list[int]:
    """Every process, or those of process group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        if pgid is not None:
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2 :].split()[2]) != pgid:
                continue
        pids.append(int(entry.name))
    return pids


def group_listens(pgid: int, port: int) -> bool:
    """Does process group ``pgid`` (a server started with setsid) hold the socket listening on ``port``?

    The leader first: spark-submit execs into the server's JVM, which is what listens.
    """
    for table in ("tcp6", "tcp"):  # the JVM's socket is in tcp6: one table read, not two
        sockets = _listening_sockets(port, (table,))
        if sockets and (_holds(pgid, sockets) or any(_holds(pid, sockets) for pid in _pids(pgid) if pid != pgid)):
            return True
    return False


def listener(port: int) -> str | None:
    """``pid N (command line)`` of the process listening on ``port``, when this user may see it."""
    sockets = _listening_sockets(port)
    for pid in _pids() if sockets else []:
        if _holds(pid, sockets):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                return f"pid {pid}"
            command = " ".join(" ".join(a.decode(errors="replace").split()) for a in argv if a)  # one line
            return f"pid {pid}: {command[:120]}{'...' if len(command) > 120 else ''}"
    return None
