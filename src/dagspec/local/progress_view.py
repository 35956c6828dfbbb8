"""``dagspec run``'s view of running stages: their progress lines, found in the run's log as it grows.

The stage jobs print progress markers (``dagspec.plan.progress``); ``airflow dags test`` writes
them into the run log with the rest of the task logs. On a terminal the view keeps one live line
per running stage (redrawn in place, gone when the stage finishes); elsewhere (CI, a pipe) it
prints each progress line as it comes: the job already prints at most one per interval per stage.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dagspec.plan.progress import MARKER, StageProgress, find_progress

POLL_S = 0.5  # how often the log is read: a read of what was appended, nothing when nothing was


def progress_text(progress: StageProgress) -> str:
    """``  train_xgb      [  42 s] round 40/200 validation-logloss=0.5312, ~12 s left``."""
    return f"  {progress.stage:20} [{progress.elapsed_s:5.0f} s] {progress.text()}"


class ProgressView:
    """Shows progress lines: live (one line per running stage, redrawn) or plain (one line each)."""

    def __init__(self, out: IO[str], *, live: bool) -> None:
        self.out = out
        self.live = live
        self.running: dict[str, str] = {}  # stage -> its latest text, in the order stages started
        self.drawn = 0  # lines of the live block on screen

    def show(self, progress: StageProgress) -> None:
        if not self.live:
            if not progress.finished:
                print(f"progress{progress_text(progress)}", file=self.out, flush=True)
            return
        if progress.finished:
            self.running.pop(progress.stage, None)
        else:
            self.running[progress.stage] = progress_text(progress)
        self._draw()

    def _draw(self) -> None:
        width = max(20, shutil.get_terminal_size().columns - 1)  # a wrapped line would break the redraw
        lines = [text[:width] for text in self.running.values()]
        up = f"\x1b[{self.drawn}F" if self.drawn else ""
        body = "".join(f"\x1b[2K{line}\n" for line in lines)
        rest = "".join("\x1b[2K\n" for _ in range(self.drawn - len(lines)))  # blank what is gone
        back = f"\x1b[{self.drawn - len(lines)}F" if self.drawn > len(lines) else ""
        self.out.write(up + body + rest + back)
        self.out.flush()
        self.drawn = len(lines)

    def close(self) -> None:
        """Leave nothing of the live block on the screen."""
        if self.live and self.drawn:
            self.running.clear()
            self._draw()


def _follow(log_path: Path, view: ProgressView, stop: threading.Event) -> None:
    offset = 0
    pending = ""
    while True:
        stopping = stop.wait(POLL_S)
        with contextlib.suppress(OSError), log_path.open("r", encoding="utf-8", errors="replace") as handle:
            handle.seek(offset)
            chunk = handle.read()
            offset = handle.tell()
            lines = (pending + chunk).split("\n")
            pending = lines.pop()  # a line still being written
            for progress in find_progress(line for line in lines if MARKER in line):
                view.show(progress)
        if stopping:
            return


@contextlib.contextmanager
def follow_progress(log_path: Path, out: IO[str] | None = None) -> Iterator[ProgressView]:
    """Show the progress lines appended to ``log_path`` while the block runs."""
    stream = out or sys.stdout
    view = ProgressView(stream, live=stream.isatty())
    stop = threading.Event()
    thread = threading.Thread(target=_follow, args=(log_path, view, stop), name="dagspec-progress-view", daemon=True)
    thread.start()
    try:
        yield view
    finally:
        stop.set()
        thread.join(timeout=10)
        view.close()
