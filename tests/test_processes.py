"""Process-group handling of dagspec.processes with real processes (no Spark, no Airflow: fast)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagspec.local.cluster import CLUSTER, cluster_down, cluster_status
from dagspec.processes import (
    ServiceError,
    ServiceGroup,
    ServiceProcess,
    free_port,
    port_free,
    refuse_if_running,
    start_all,
    start_process,
    stop_process,
    stopped_on_failure,
    wait_ready,
)

# A leader that forks two grandchildren and waits: as a Spark worker forks executors, or Airflow's
# scheduler forks task supervisors that fork spark-submit.
TREE = "sleep 300 & sleep 300 & wait"
# A leader that ignores SIGTERM, with a child that ignores it too: only SIGKILL stops them.
STUBBORN = "trap '' TERM; (trap '' TERM; sleep 300) & wait; wait"


def _env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"]}


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def _wait_for(condition, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_started_process_leads_its_own_group_and_stop_ends_every_descendant(tmp_path: Path) -> None:
    proc = start_process("tree", ["bash", "-c", TREE], _env(), tmp_path)
    try:
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
        assert os.getsid(proc.pid) == proc.pid  # setsid: no controlling terminal, no shared session
        assert _wait_for(lambda: len(_group_pids(proc.pid)) == 3)
        assert proc.running and proc.group_alive()
        assert stop_process(proc, timeout=10) is False  # SIGTERM was enough
        assert _group_pids(proc.pid) == []
        assert not proc.running and not proc.group_alive()
    finally:
        stop_process(proc, timeout=2)


def test_stop_escalates_to_sigkill_for_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    proc = start_process("stubborn", ["bash", "-c", STUBBORN], _env(), tmp_path)
    try:
        assert _wait_for(lambda: len(_group_pids(proc.pid)) >= 2)
        started = time.monotonic()
        assert stop_process(proc, timeout=1.0) is True
        assert time.monotonic() - started < 10
        assert _group_pids(proc.pid) == []
    finally:
        stop_process(proc, timeout=1)


# A leader that stops its child itself on SIGTERM (with another signal), as Airflow's triggerer does:
# each records the signal that stopped it.
SUPERVISOR = """
( trap 'echo child:USR1 >> "$1"; exit 0' USR1; trap 'echo child:TERM >> "$1"; exit 0' TERM; sleep 300 & wait ) &
child=$!
trap 'echo leader:TERM >> "$1"; kill -USR1 $child; wait $child; exit 0' TERM
wait
"""


def test_the_leader_is_signalled_first_and_stops_its_own_children(tmp_path: Path) -> None:
    record = tmp_path / "signals"
    proc = start_process("supervisor", ["bash", "-c", SUPERVISOR, "supervisor", str(record)], _env(), tmp_path)
    try:
        assert _wait_for(lambda: len(_group_pids(proc.pid)) == 3)
        assert stop_process(proc, timeout=10) is False
        assert record.read_text().split() == ["leader:TERM", "child:USR1"]  # the child was left to its leader
        assert _group_pids(proc.pid) == []  # and what the child left behind went with the group
    finally:
        stop_process(proc, timeout=1)


def test_children_left_behind_by_a_dead_leader_are_still_stopped(tmp_path: Path) -> None:
    proc = start_process("orphaning", ["bash", "-c", "sleep 300 & sleep 300 & exit 0"], _env(), tmp_path)
    try:
        assert _wait_for(lambda: not proc.running)
        assert proc.group_alive()  # the sleeps outlive their parent, as orphaned executors would
        stop_process(proc, timeout=5)
        assert _group_pids(proc.pid) == []
    finally:
        stop_process(proc, timeout=1)


def test_a_recorded_pid_reused_by_another_process_is_not_ours(tmp_path: Path) -> None:
    proc = start_process("sleeper", [sys.executable, "-c", "import time; time.sleep(300)"], _env(), tmp_path)
    try:
        impostor = ServiceProcess(name="old", pid=proc.pid, start_ticks=proc.start_ticks - 1, argv=[], log="")
        assert proc.running
        assert not impostor.running
    finally:
        stop_process(proc, timeout=5)


def test_group_record_round_trips_and_down_stops_and_forgets_it(tmp_path: Path) -> None:
    group = ServiceGroup(CLUSTER, [], {"master_url": "spark://127.0.0.1:1", "webui_url": "http://127.0.0.1:1"})
    group.processes.append(start_process("a", ["sleep", "300"], _env(), tmp_path))
    group.processes.append(start_process("b", ["sleep", "300"], _env(), tmp_path))
    group.save(tmp_path)
    try:
        loaded = ServiceGroup.load(tmp_path, CLUSTER)
        assert loaded is not None and loaded.processes == group.processes
        assert cluster_status(run_dir=tmp_path).processes == {"a": True, "b": True}
        with pytest.raises(ServiceError, match=r"already running: a .*stop it first"):
            refuse_if_running(tmp_path, CLUSTER, "dagspec cluster down")
        report = cluster_down(run_dir=tmp_path)
        assert "a (pid" in report and "stopped" in report
        assert not (tmp_path / "cluster.json").exists()
        assert all(not p.running for p in group.processes)
        assert str(cluster_status(run_dir=tmp_path)) == "Spark cluster: not running"
    finally:
        group.stop(tmp_path)


def test_stale_record_of_dead_processes_is_forgotten(tmp_path: Path) -> None:
    proc = start_process("gone", ["true"], _env(), tmp_path)
    assert _wait_for(lambda: not proc.running)
    ServiceGroup(CLUSTER, [proc], {"master_url": "x", "webui_url": "http://127.0.0.1:1"}).save(tmp_path)
    refuse_if_running(tmp_path, CLUSTER, "dagspec cluster down")  # does not raise
    assert not (tmp_path / "cluster.json").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [(["sleep", "300"], r"^never ready\n--- .*a\.log"), (["true"], r"^'a' exited\n--- .*a\.log")],
)
def test_a_start_that_never_gets_ready_or_loses_a_process_stops_the_group(
    tmp_path: Path, argv: list[str], match: str
) -> None:
    group = ServiceGroup(CLUSTER, [], {})
    with pytest.raises(ServiceError, match=match), stopped_on_failure(group, tmp_path):
        start_all(group, tmp_path, [("a", argv)], _env())
        wait_ready(group, tmp_path, lambda: False, 1.0, exited="'a' exited", late="never ready", interval=0.1)
    assert not (tmp_path / "cluster.json").exists() and not group.processes[0].running


def test_stop_refuses_a_process_that_is_not_a_group_leader(tmp_path: Path) -> None:
    # A record edited by hand (or a PID the kernel gave to something else) must never turn into
    # a signal to someone else's process group.
    fake = ServiceProcess(name="me", pid=os.getpid(), start_ticks=_start_ticks(os.getpid()), argv=[], log="")
    if os.getpgid(0) == os.getpid():
        pytest.skip("the test runner leads its own process group")
    with pytest.raises(ServiceError, match="not the leader"):
        stop_process(fake, timeout=0.1)


def _start_ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[19])


def test_port_helpers() -> None:
    port = free_port()
    assert port_free(port)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_free(port)


def test_own_peak_rss_is_the_childs_not_its_parents() -> None:
    # ru_maxrss survives fork and exec: a small child of a large parent reported the parent's peak
    # (every Connect client's manifest showed the Airflow task process's RSS)
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))
    code = (
        "import resource; from dagspec.processes import own_peak_rss_mb; "
        "print(own_peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    own, inherited = map(float, subprocess.check_output([sys.executable, "-c", code], text=True).split())
    assert inherited >= 300  # what the manifests recorded before
    assert 0 < own < 200
    del ballast
