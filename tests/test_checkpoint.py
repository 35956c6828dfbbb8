"""The checkpoint store on real folders: what counts as done, commits, replacement, leases, exports."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagspec import checkpoint
from dagspec.checkpoint import Checkpoint
from dagspec.errors import StorageError


def _attempt(stage_dir: Path, fingerprint: str, rows: int, outputs: tuple[str, ...] = ("data",)) -> tuple[str, dict]:
    work = Checkpoint(str(stage_dir), fingerprint).new_attempt_dir("a1")
    for name in outputs:
        (Path(work) / name).mkdir()
        (Path(work) / name / "part-0").write_text(str(rows))
    return work, {"fingerprint": fingerprint, "outputs": {name: {"rows": rows} for name in outputs}}


def test_states_missing_broken_and_done(tmp_path: Path) -> None:
    point = Checkpoint(str(tmp_path / "s"), "f1")
    assert point.state().state == "missing"
    work, manifest = _attempt(tmp_path / "s", "f1", 3)
    assert point.commit(work, manifest)
    assert point.state(["data"]).done and point.manifest()["outputs"]["data"]["rows"] == 3

    (tmp_path / "s" / "f1" / "_SUCCESS").unlink()
    assert point.state().state == "broken" and "_SUCCESS" in point.state().detail
    (tmp_path / "s" / "f1" / "_SUCCESS").write_text("")
    (tmp_path / "s" / "f1" / "manifest.json").write_text(json.dumps({"fingerprint": "other", "outputs": {}}))
    assert "names fingerprint other" in point.state().detail
    (tmp_path / "s" / "f1" / "manifest.json").write_text(json.dumps(manifest))
    assert point.state(["data", "extra"]).state == "broken"
    import shutil

    shutil.rmtree(tmp_path / "s" / "f1" / "data")
    assert point.state().detail.endswith("f1/data is missing")
    with pytest.raises(StorageError, match=r"its input checkpoint is not usable: output folder .*f1/data is missing"):
        point.require(["data"], "stage 'x', input 'data'")


def test_a_late_committer_discards_its_work_and_force_swaps_atomically(tmp_path: Path) -> None:
    point = Checkpoint(str(tmp_path / "s"), "f1")
    first, manifest = _attempt(tmp_path / "s", "f1", 1)
    point.commit(first, manifest)
    late, late_manifest = _attempt(tmp_path / "s", "f1", 2)
    assert not point.commit(late, late_manifest)  # a valid checkpoint is never renamed away
    assert (tmp_path / "s" / "f1" / "data" / "part-0").read_text() == "1" and not Path(late).exists()

    forced, forced_manifest = _attempt(tmp_path / "s", "f1", 9)
    assert point.commit(forced, forced_manifest, replace=True)
    assert (tmp_path / "s" / "f1" / "data" / "part-0").read_text() == "9" and point.state().done
    (aside,) = (tmp_path / "s").glob("_old-f1-*")  # kept for readers that opened it, until gc
    assert (aside / "data" / "part-0").read_text() == "1"


def test_a_broken_leftover_is_replaced_and_removed(tmp_path: Path) -> None:
    (tmp_path / "s" / "f1" / "data").mkdir(parents=True)  # renamed into place, then killed before _SUCCESS
    point = Checkpoint(str(tmp_path / "s"), "f1")
    work, manifest = _attempt(tmp_path / "s", "f1", 4)
    assert point.commit(work, manifest)
    assert point.state().done and not list((tmp_path / "s").glob("_old-*"))


HOLDER = """
import sys, time, json
from pathlib import Path
from dagspec.checkpoint import Checkpoint
point = Checkpoint(sys.argv[1], "f1")
with point.lease() as lease:
    print("leased", flush=True)
    time.sleep(2)
    work = point.new_attempt_dir(lease.attempt)
    (Path(work) / "data").mkdir()
    point.commit(work, {"fingerprint": "f1", "outputs": {"data": {}}})
"""


def test_a_second_attempt_waits_for_the_lease_and_finds_the_commit(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "s")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "leased"
    started = time.monotonic()
    with Checkpoint(str(tmp_path / "s"), "f1").lease(poll_s=0.1) as lease:
        waited = time.monotonic() - started
        assert lease.owned()
        assert Checkpoint(str(tmp_path / "s"), "f1").state().done  # what the holder checks again: a hit
    assert holder.wait(timeout=30) == 0
    assert waited > 1.0 and Checkpoint(str(tmp_path / "s"), "f1").state().done
    assert not (tmp_path / "s" / "_lease-f1").exists()


def test_the_lease_of_a_dead_process_is_taken_over_at_once(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    point = Checkpoint(str(tmp_path / "s"), "f1")
    Path(point.lease_path).parent.mkdir(parents=True)
    import socket

    stale = {"host": socket.gethostname(), "pid": int(dead.stdout), "attempt": "x", "heartbeat": time.time()}
    Path(point.lease_path).write_text(json.dumps(stale))
    assert checkpoint.lease_is_stale(stale)
    with point.lease(wait_s=5) as lease:
        assert lease.owned()
    assert not Path(point.lease_path).exists()


def test_an_export_is_swapped_in_whole_and_records_its_fingerprint(tmp_path: Path) -> None:
    target = checkpoint.export_target(str(tmp_path), "out/train")
    assert target == f"{tmp_path}/exports/out/train"
    for version in ("a", "b"):
        staged = checkpoint.staging_path(target)
        Path(staged).mkdir(parents=True)
        (Path(staged) / "part-0").write_text(version)
        checkpoint.publish(staged, target, {"fingerprint": f"fp-{version}"})
        assert (Path(target) / "part-0").read_text() == version
        assert checkpoint.published_fingerprint(target) == f"fp-{version}"
    assert sorted(p.name for p in Path(target).parent.iterdir()) == ["train"]  # no staging or old copy left
    with pytest.raises(StorageError, match="would leave the storage root"):
        checkpoint.export_target(str(tmp_path), "../escape")
