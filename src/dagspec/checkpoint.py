"""The checkpoint store: the only code that checks, writes, commits or replaces a checkpoint or an export.

Layout of one stage under the storage root::

    <root>/<dag_id>/<stage>/
      <fingerprint>/                 committed: one folder per output, manifest.json, _SUCCESS (last)
      _tmp-<fingerprint>-<attempt>/  an attempt being written (never read)
      _lease-<fingerprint>           the live attempt's lease: owner and heartbeat
      _scratch-<fingerprint>/        state that survives a killed attempt (training checkpoints)
      _old-<fingerprint>-<id>/       a checkpoint replaced by --force, removed by `dagspec gc`
      _failed-<fingerprint>.json     the cause of the last failed attempt (``dagspec.plan.failure``)
      _LATEST                        the fingerprint last committed (or hit): what other specs read

A checkpoint is trusted only when ``_SUCCESS`` exists, ``manifest.json`` names its fingerprint and
every output folder it lists exists. One attempt per fingerprint holds the lease; a second one
waits, and finding a committed checkpoint discards its own work and succeeds as a hit.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dagspec import digest, storage
from dagspec.errors import DagspecError, StorageError

SUCCESS_MARKER = "_SUCCESS"
MANIFEST = "manifest.json"
EXPORT_MARKER = "_DAGSPEC_EXPORT.json"
EXPORTS_DIR = "exports"
TMP_PREFIX = "_tmp-"
OLD_PREFIX = "_old-"
LEASE_PREFIX = "_lease-"
SCRATCH_PREFIX = "_scratch-"
FAILED_PREFIX = "_failed-"
LATEST = "_LATEST"
LEASE_TTL_S = 90.0
HEARTBEAT_S = 15.0


class LeaseLostError(DagspecError):
    """Another attempt took this fingerprint's lease (ours was stale)."""


@dataclass(frozen=True)
class CheckpointState:
    """``done``, ``missing`` or ``broken`` (present but not trustworthy), with why."""

    state: str
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.state == "done"


def _now() -> float:
    return time.time()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint of one fingerprint of one stage."""

    stage_dir: str
    fingerprint: str

    @property
    def path(self) -> str:
        return f"{self.stage_dir}/{self.fingerprint}"

    @property
    def success_path(self) -> str:
        return f"{self.path}/{SUCCESS_MARKER}"

    @property
    def scratch_path(self) -> str:
        return f"{self.stage_dir}/{SCRATCH_PREFIX}{self.fingerprint}"

    @property
    def lease_path(self) -> str:
        return f"{self.stage_dir}/{LEASE_PREFIX}{self.fingerprint}"

    def output_path(self, name: str) -> str:
        """Where output ``name`` lives once committed."""
        return f"{self.path}/{name}"

    # --- reading ------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any] | None:
        """The manifest of a committed checkpoint, or None."""
        if not storage.exists(self.success_path):
            return None
        return _read_json(f"{self.path}/{MANIFEST}")

    def content(self, output: str) -> str | None:
        """The content digest of a committed output (None: not committed, or committed before digests)."""
        manifest = self.manifest()
        if manifest is None or manifest.get("fingerprint") != self.fingerprint:
            return None
        recorded = (manifest.get("content") or {}).get(output)
        return str(recorded) if recorded else None

    def state(self, outputs: Iterable[str] | None = None) -> CheckpointState:
        """Is this checkpoint trustworthy? Checks ``_SUCCESS``, the manifest and every output folder."""
        if not storage.exists(self.path):
            return CheckpointState("missing")
        if not storage.exists(self.success_path):
            return CheckpointState("broken", f"{self.path} has no {SUCCESS_MARKER} (an attempt died mid-commit)")
        manifest = _read_json(f"{self.path}/{MANIFEST}")
        if manifest is None:
            return CheckpointState("broken", f"{self.path}/{MANIFEST} is missing or unreadable")
        if manifest.get("fingerprint") != self.fingerprint:
            return CheckpointState("broken", f"{self.path}/{MANIFEST} names fingerprint {manifest.get('fingerprint')}")
        expected = set(outputs) if outputs is not None else set(manifest.get("outputs") or {})
        for name in sorted(expected):
            if not storage.exists(self.output_path(name)):
                return CheckpointState("broken", f"output folder {self.output_path(name)} is missing")
        return CheckpointState("done")

    def require(self, outputs: Iterable[str], reader: str) -> None:
        """Raise a clear error unless this checkpoint is committed and complete (before reading it)."""
        found = self.state(outputs)
        if not found.done:
            why = found.detail or f"{self.path} does not exist"
            raise StorageError(f"{reader}: its input checkpoint is not usable: {why}; run the upstream stage again")

    # --- the lease ----------------------------------------------------------------------------

    @contextmanager
    def lease(self, *, wait_s: float = 6 * 3600, poll_s: float = 1.0) -> Iterator[Lease]:
        """Hold this fingerprint's lease, waiting while a live attempt holds it.

        The holder must check the checkpoint again once it has the lease: the attempt it waited
        for may have committed.
        """
        attempt = uuid.uuid4().hex[:12]
        deadline = _now() + wait_s
        while True:
            if storage.create_exclusive(self.lease_path, _lease_text(attempt)):
                break
            holder = _read_json(self.lease_path)
            if holder is None or lease_is_stale(holder):
                self._break_stale_lease()
                continue
            if _now() > deadline:
                raise StorageError(f"{self.lease_path} is held by {holder.get('owner')} for longer than {wait_s:.0f} s")
            time.sleep(poll_s)
        held = Lease(self, attempt)
        held.start()
        try:
            yield held
        finally:
            held.release()

    def _break_stale_lease(self) -> None:
        # renaming is atomic: of two attempts breaking the same stale lease, only one succeeds
        aside = f"{self.lease_path}.stale-{uuid.uuid4().hex[:8]}"
        try:
            storage.rename(self.lease_path, aside)
        except (OSError, StorageError):
            return
        storage.delete(aside)

    # --- writing ------------------------------------------------------------------------------

    def new_attempt_dir(self, attempt: str) -> str:
        """A fresh temporary directory for one attempt; stale ones of this fingerprint are removed."""
        for name in storage.list_names(self.stage_dir):
            if name.startswith(f"{TMP_PREFIX}{self.fingerprint}-") and not name.endswith(attempt):
                storage.delete(f"{self.stage_dir}/{name}")
        work_dir = f"{self.stage_dir}/{TMP_PREFIX}{self.fingerprint}-{attempt}"
        storage.makedirs(work_dir)
        return work_dir

    def commit(self, work_dir: str, manifest: Mapping[str, Any], *, replace: bool = False) -> bool:
        """Move a finished attempt into place; False when a valid checkpoint was already there.

        ``replace`` (a forced run) swaps the new checkpoint in atomically where the filesystem
        can (Linux local disks), so there is never a moment without a valid checkpoint; the old
        one is kept aside for readers that already opened it, until ``dagspec gc``.

        The manifest gets each output's content digest (``content``): downstream cache keys are
        built on it, so a recomputed stage whose output is byte-identical leaves them unchanged.
        """
        started = time.perf_counter()
        content = {name: digest.tree_digest(f"{work_dir}/{name}") for name in sorted(manifest.get("outputs") or {})}
        manifest = {**manifest, "content": content, "content_digest_s": round(time.perf_counter() - started, 3)}
        storage.write_text(f"{work_dir}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True, default=str))
        current = self.state()
        if current.done and not replace:
            storage.delete(work_dir)
            self.point_latest()
            return False
        if not storage.exists(self.path):
            storage.rename(work_dir, self.path)
            storage.write_text(self.success_path, "")
        else:
            aside = f"{self.stage_dir}/{OLD_PREFIX}{self.fingerprint}-{uuid.uuid4().hex[:8]}"
            storage.write_text(f"{work_dir}/{SUCCESS_MARKER}", "")
            if storage.exchange(work_dir, self.path):
                storage.rename(work_dir, aside)
            else:
                storage.rename(self.path, aside)
                storage.rename(work_dir, self.path)
            if not current.done:
                storage.delete(aside)  # a broken leftover: nobody can be reading it
        storage.delete(self.scratch_path)
        self.point_latest()
        return True

    def point_latest(self) -> None:
        """Name this committed checkpoint in the stage's ``_LATEST`` (replaced atomically): the one
        another spec reading this stage's output reads (``inputs: {x: {spec: ..., output: ...}}``)."""
        record = {"fingerprint": self.fingerprint, "pointed": datetime.now(UTC).isoformat()}
        storage.write_text(f"{self.stage_dir}/{LATEST}", json.dumps(record))


def _lease_text(attempt: str) -> str:
    host, pid = socket.gethostname(), os.getpid()
    return json.dumps(
        {"owner": f"{host}:{pid}:{attempt}", "host": host, "pid": pid, "attempt": attempt, "heartbeat": _now()}
    )


def lease_is_stale(holder: Mapping[str, Any]) -> bool:
    """A lease whose heartbeat stopped, or whose owner process on this host is gone."""
    same_host = holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int)
    if same_host and not _pid_alive(int(holder["pid"])):
        return True
    return _now() - float(holder.get("heartbeat") or 0) > LEASE_TTL_S


class Lease:
    """A held lease, refreshed by a background thread until released."""

    def __init__(self, checkpoint: Checkpoint, attempt: str) -> None:
        self.checkpoint = checkpoint
        self.attempt = attempt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{attempt}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def owned(self) -> bool:
        """Is the lease file still ours?"""
        holder = _read_json(self.checkpoint.lease_path)
        return holder is not None and holder.get("attempt") == self.attempt

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if not self.owned():
                return
            storage.write_text(self.checkpoint.lease_path, _lease_text(self.attempt))

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.owned():
            storage.delete(self.checkpoint.lease_path)


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        text = storage.read_text(path)
        data = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def latest(stage_dir: str) -> Checkpoint | None:
    """The checkpoint a stage's ``_LATEST`` names, if it is committed and complete; else None."""
    pointer = _read_json(f"{stage_dir}/{LATEST}")
    if pointer is None or not isinstance(pointer.get("fingerprint"), str):
        return None
    found = Checkpoint(stage_dir, pointer["fingerprint"])
    return found if found.state().done else None


# --- exports --------------------------------------------------------------------------------------


def export_target(storage_root: str, relative: str) -> str:
    """Where an export publishes: under ``<root>/exports/``, a place no checkpoint can ever be."""
    return storage.join_under(f"{storage_root.rstrip('/')}/{EXPORTS_DIR}", relative)


def published_fingerprint(target: str) -> str | None:
    """The fingerprint of the stage whose data an export folder holds (None: none or foreign)."""
    marker = _read_json(f"{target}/{EXPORT_MARKER}")
    return str(marker["fingerprint"]) if marker and "fingerprint" in marker else None


def staging_path(target: str) -> str:
    """A sibling of ``target`` to write the next version of an export into."""
    return f"{target.rstrip('/')}.__tmp-{uuid.uuid4().hex[:8]}"


def publish(staged: str, target: str, record: Mapping[str, Any]) -> None:
    """Make a fully written ``staged`` folder the export ``target``, recording what it holds.

    Readers of ``target`` see the old data or the new, never a mix: an atomic exchange where the
    filesystem allows, else two renames.
    """
    storage.write_text(f"{staged}/{EXPORT_MARKER}", json.dumps({**record, "published": datetime.now(UTC).isoformat()}))
    replace_folder(staged, target)


def replace_folder(staged: str, target: str) -> None:
    """Make ``staged`` the folder ``target``: an atomic exchange where possible, else two renames."""
    if not storage.exists(target):
        storage.rename(staged, target)
    elif storage.exchange(staged, target):
        storage.delete(staged)
    else:
        old = f"{target.rstrip('/')}.__old-{uuid.uuid4().hex[:8]}"
        storage.rename(target, old)
        storage.rename(staged, target)
        storage.delete(old)


# --- housekeeping ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One folder or file of a stage directory, classified for `dagspec gc`."""

    name: str
    kind: str  # committed | broken | attempt | replaced | scratch | lease | failure
    fingerprint: str
    finished: str = ""


def stage_entries(stage_dir: str) -> list[Entry]:
    """Everything dagspec keeps in one stage's directory, classified."""
    entries: list[Entry] = []
    for name in storage.list_names(stage_dir):
        if name.startswith(TMP_PREFIX):
            entries.append(Entry(name, "attempt", name[len(TMP_PREFIX) :].rsplit("-", 1)[0]))
        elif name.startswith(OLD_PREFIX):
            entries.append(Entry(name, "replaced", name[len(OLD_PREFIX) :].rsplit("-", 1)[0]))
        elif name.startswith(SCRATCH_PREFIX):
            entries.append(Entry(name, "scratch", name[len(SCRATCH_PREFIX) :]))
        elif name.startswith(LEASE_PREFIX):
            entries.append(Entry(name, "lease", name[len(LEASE_PREFIX) :].split(".stale-")[0]))
        elif name.startswith(FAILED_PREFIX):
            entries.append(Entry(name, "failure", name[len(FAILED_PREFIX) :].removesuffix(".json")))
        elif not name.startswith((".", "_")):
            found = Checkpoint(stage_dir, name)
            manifest = found.manifest() if found.state().done else None
            kind = "committed" if manifest is not None else "broken"
            entries.append(Entry(name, kind, name, str((manifest or {}).get("finished", ""))))
    return entries


def lease_is_live(stage_dir: str, fingerprint: str) -> bool:
    """Does a live attempt hold this fingerprint's lease?"""
    holder = _read_json(f"{stage_dir}/{LEASE_PREFIX}{fingerprint}")
    return holder is not None and not lease_is_stale(holder)
