"""dagspec.exits: a process leaving without interpreter teardown still finishes what a normal exit finishes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.exits import exit_status

LEAVER = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from dagspec.exits import exit_now
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late() -> None:
    time.sleep(0.3)
    (out / "thread").write_text("ran")
threading.Thread(target=late).start()
pool = ThreadPoolExecutor(1)  # its idle worker thread is not a daemon: only threading's exit hook stops it
pool.submit(lambda: None).result()
sys.stdout.write("buffered, no newline")
exit_now(3)
"""


def test_exit_now_ends_threads_as_python_does_runs_exit_handlers_flushes_and_keeps_the_code(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", LEAVER, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "buffered, no newline"  # a pipe is block-buffered: lost without the flush
    assert (tmp_path / "thread").read_text() == "ran"
    assert (tmp_path / "atexit").read_text() == "ran"


@pytest.mark.parametrize(("code", "status", "printed"), [(None, 0, ""), (4, 4, ""), ("bad spec", 1, "bad spec\n")])
def test_exit_status_is_the_interpreters(
    code: object, status: int, printed: str, capsys: pytest.CaptureFixture
) -> None:
    assert exit_status(SystemExit(code)) == status
    assert capsys.readouterr().err == printed
