"""``schedule: {files: GLOB}``: a trigger the triggerer runs that fires once per batch of new files.

Airflow's event-driven scheduling runs an ``AssetWatcher``'s trigger in the triggerer; each event
it yields updates the watched asset, which queues one run of the DAG scheduled on it. The standard
provider's ``FileTrigger`` is no ``BaseEventTrigger`` (it cannot drive a watcher) and its
``FileDeleteTrigger`` deletes what it finds, so this is a small trigger of ours:

- each poll lists the glob; a file counts once its size and modification time are the same as at
  the previous poll (a file still being written is left for a later poll);
- the files that count and were not seen before (or were seen with another size or time: rewritten)
  make one event listing them all: one run per batch, never one per file or per poll;
- the seen files (path -> size, mtime) are kept in a JSON file under the storage root, replaced
  atomically *before* the event is yielded, so a restarted triggerer does not fire for them again.

The triggerer imports the class by its path in the installed dagspec package (``CLASSPATH``).
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
import os
import stat
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from dagspec.spec.roots import glob_base

CLASSPATH = "dagspec.airflow.new_files.NewFilesTrigger"
Stat = tuple[int, int]  # size in bytes, modification time in ns


def state_path(root: str, dag_id: str, pattern: str) -> str:
    """Where a watcher keeps the files it has seen: ``<root>/<dag_id>/_watch/<sha of the glob>.json``."""
    return f"{root.rstrip('/')}/{dag_id}/_watch/{hashlib.sha256(pattern.encode()).hexdigest()[:16]}.json"


def list_matches(pattern: str) -> dict[str, Stat]:
    """Every regular file the glob matches (``**`` included), with its size and modification time.

    Only files inside the folder the glob lists (checked against the deployment's watch roots when
    the spec loaded): a match reached through a symlink that leads out of it is left out.
    """
    found: dict[str, Stat] = {}
    base = os.path.realpath(glob_base(pattern))
    for path in glob.glob(pattern, recursive=True):
        if os.path.commonpath([base, os.path.realpath(path)]) != base:
            continue
        try:
            info = os.stat(path)
        except FileNotFoundError:  # removed between the listing and the stat
            continue
        if stat.S_ISREG(info.st_mode):
            found[path] = (info.st_size, info.st_mtime_ns)
    return found


def new_files(now: Mapping[str, Stat], previous: Mapping[str, Stat], seen: Mapping[str, Stat]) -> list[str]:
    """The files unchanged since the previous poll that were not seen as they are now."""
    return sorted(path for path, found in now.items() if previous.get(path) == found and seen.get(path) != found)


def read_seen(path: str) -> dict[str, Stat]:
    """The seen files a watcher recorded (none when it has not fired yet)."""
    try:
        with open(path, encoding="utf-8") as handle:
            recorded = json.load(handle)
    except FileNotFoundError:
        return {}
    return {str(p): (int(s[0]), int(s[1])) for p, s in recorded.get("seen", {}).items()}


def write_seen(path: str, seen: Mapping[str, Stat]) -> None:
    """Replace the record atomically (a temporary sibling, flushed, then renamed over it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"seen": {p: list(s) for p, s in sorted(seen.items())}}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class NewFilesTrigger(BaseEventTrigger):
    """Fire once per poll that finds new files matching ``pattern`` (an absolute local glob)."""

    def __init__(self, pattern: str, state: str, poll_interval: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # Airflow is untyped here
        self.pattern = pattern
        self.state = state
        self.poll_interval = poll_interval
        self._previous: dict[str, Stat] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and arguments the triggerer re-creates this trigger from."""
        return CLASSPATH, {"pattern": self.pattern, "state": self.state, "poll_interval": self.poll_interval}

    def poll(self) -> list[str]:
        """One look at the glob: the new files (recorded as seen before they are returned), or []."""
        now = list_matches(self.pattern)
        found = new_files(now, self._previous, read_seen(self.state))
        self._previous = now
        if found:
            seen = {p: s for p, s in read_seen(self.state).items() if p in now}  # forget files gone since
            write_seen(self.state, {**seen, **{p: now[p] for p in found}})
        return found

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll forever; yield one event per batch of new files."""
        while True:
            found = await asyncio.to_thread(self.poll)
            if found:
                self.log.info("%d new file(s) match %s: %s", len(found), self.pattern, ", ".join(found[:20]))
                yield TriggerEvent({"glob": self.pattern, "files": found})  # type: ignore[no-untyped-call]
            await asyncio.sleep(self.poll_interval)
