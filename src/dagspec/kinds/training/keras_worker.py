"""One Spark barrier task of a ``train_keras`` run with ``workers >= 2``.

The task itself stays light (no TensorFlow): it binds a free port, exchanges addresses with the
other tasks (``allGather``), builds ``TF_CONFIG`` and runs the TensorFlow worker as a child process
(``python -m dagspec.kinds.training.keras_worker``). A child process because
- TensorFlow's collective runtime is configured once per process, while Spark reuses Python
  workers across tasks (a second run in the same worker would find a stale cluster);
- a failing child exits, its traceback is in hand, and the task raises it at once: Spark then
  aborts the barrier stage and kills the sibling tasks, which would otherwise wait for ever in an
  all-reduce. The child dies with its task (PR_SET_PDEATHSIG), so nothing is left behind.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path

FAILURE_MARKER = "train_keras worker failed"


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL when the Spark task's process goes away (Linux)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except OSError:  # not Linux: Spark's task kill still ends the stage, the child may linger
        pass


def run_barrier_task(job_json: str, resume: bytes | None) -> str:
    """Body of one barrier task: returns this worker's result as JSON (the chief's has the model)."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    rank = ctx.partitionId()
    # local mode gives every task the same host:port here, so each task picks its own port
    host = ctx.getTaskInfos()[rank].address.rsplit(":", 1)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
        addresses = ctx.allGather(f"{host}:{port}")  # ordered by partition id
    workdir = Path(tempfile.mkdtemp(prefix=f"dagspec-train-keras-w{rank}-"))
    try:
        (workdir / "job.json").write_text(job_json)
        resume_path = ""
        if resume is not None:
            resume_path = str(workdir / "resume.npz")
            Path(resume_path).write_bytes(resume)
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": rank}})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        cmd = [sys.executable, "-m", "dagspec.kinds.training.keras_worker", str(workdir), str(rank), resume_path]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, preexec_fn=_die_with_parent
        )
        tail: collections.deque[str] = collections.deque(maxlen=60)
        assert proc.stdout is not None
        for line in proc.stdout:  # into the task log as it comes
            sys.stderr.write(f"[train_keras worker {rank}] {line}")
            tail.append(line)
        code = proc.wait()
        if code != 0:
            when = datetime.now(UTC).isoformat(timespec="milliseconds")
            raise RuntimeError(f"{FAILURE_MARKER}: worker {rank} exited with {code} at {when}:\n{''.join(tail)}")
        result = json.loads((workdir / "result.json").read_text())
        if rank == 0:
            result["model_b64"] = base64.b64encode((workdir / "model.keras").read_bytes()).decode()
        return json.dumps(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Child entry: ``WORKDIR RANK [RESUME_NPZ]``; writes result.json (and model.keras on the chief)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from dagspec.kinds.training.keras_loop import TrainJob, run_training

    workdir, rank = Path(argv[0]), int(argv[1])
    resume = Path(argv[2]) if len(argv) > 2 and argv[2] else None
    job = TrainJob.from_json((workdir / "job.json").read_text())
    code = 0
    try:
        # every worker saves (the strategy's rule for collectives), only the chief's copy is returned
        result = run_training(job, rank, resume, workdir / "model.keras")
        (workdir / "result.json").write_text(json.dumps(result))
    except BaseException:  # a worker process reports any failure the same way: its traceback and exit code 1
        traceback.print_exc()
        code = 1
    # Leave without TensorFlow's exit-time shutdown handshake: when a peer has already gone, it
    # waits for that peer's heartbeat timeout (10-30 s seen here) before the process ends, which
    # delays both a finished run and the report of a failed one. Everything is on disk by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
