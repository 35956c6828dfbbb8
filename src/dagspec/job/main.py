"""The entry point of every stage: ``run_stage.py [--force] '<resolved stage JSON>'``.

Under spark-submit it is the stage's own driver. Run by plain Python with ``DAGSPEC_CONNECT_URL``
set, it is a Spark Connect client of that server (``DAGSPEC_CONNECT_LOCAL=1``: dagspec's local
server, started first when it does not answer, whose token the client reads from the project's
token file: ``dagspec.job.connect_auth``). The URL travels in the environment, not in argv,
because a remote server's URL may carry a token; every log line and failure of the job has it masked.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from dagspec.errors import DagspecError
from dagspec.job.connect_auth import server_token, with_token
from dagspec.job.connect_server import ServerSettings, ensure_server, out_of_memory
from dagspec.job.executor_wait import watch_executors
from dagspec.job.failure import stage_failure
from dagspec.job.partitions import run_partitions
from dagspec.job.progress import watch_progress
from dagspec.job.runtime import run_stage
from dagspec.job.session import create_session
from dagspec.kinds.catalog import load_catalog, plugins_dir
from dagspec.plan.failure import StageFailure, write_record
from dagspec.plan.modes import STAGE_ON_STDIN, is_session_conf, redact_url
from dagspec.plan.resolve import ResolvedStage
from dagspec.plan.resolved import PlanParamsError
from dagspec.processes import default_run_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dagspec.stage")
CONNECT_URL_VAR = "DAGSPEC_CONNECT_URL"
CONNECT_LOCAL_VAR = "DAGSPEC_CONNECT_LOCAL"
_SESSION_NAMESPACE = uuid.UUID("6f1c1e52-3d1b-4b7e-9c55-1d1a9f0c2a77")


class ConnectServerError(DagspecError):
    """The Spark Connect server could not be reached or went away during the stage."""


def shared_session_id(url: str, conf: dict[str, str]) -> str:
    """The server session shared by worker-reusing stages of the same session conf.

    Spark keys a server's Python worker pools by session, so stages in one session find their
    workers (TensorFlow, XGBoost already imported) alive. Stages with other conf get another
    session: a stage never changes the conf of a session another stage runs in.
    """
    key = json.dumps({"server": url.split(";")[0], "conf": sorted(conf.items())})
    return str(uuid.uuid5(_SESSION_NAMESPACE, key))


def _connect_session(stage: ResolvedStage, url: str) -> SparkSession:
    if os.environ.get(CONNECT_LOCAL_VAR) == "1":
        ensure_server(Path(stage.home))
        url = with_token(url, server_token(Path(stage.home)))
    conf = {k: v for k, v in stage.conf.items() if is_session_conf(k)}
    catalog = load_catalog(Path(stage.home))
    kind = catalog.get(stage.kind)
    shared = kind is not None and kind.reuse_workers
    if shared:
        url = f"{url.rstrip('/')}{'' if ';' in url else '/'};session_id={shared_session_id(url, conf)}"
    spark = create_session(f"dagspec.{stage.dag_id}.{stage.name}", remote=url, conf=conf)
    if shared:
        spark.release_session_on_close = False  # type: ignore[attr-defined]  # other stages use it
    if catalog.origins.get(stage.kind, "").startswith("plugin "):
        # the server's Python workers unpickle the kind's closures by module name: send the module
        spark.addArtifacts(catalog.files[stage.kind], pyfile=True)
    tag = f"dagspec-{stage.name}-{os.getpid()}"
    spark.addTag(tag)
    _interrupt_on_sigterm(spark, tag)
    return spark


def _interrupt_on_sigterm(spark: SparkSession, tag: str) -> None:
    """On SIGTERM (Airflow killing the task), stop this stage's running jobs on the server too:
    a Connect server would otherwise finish work nobody waits for."""

    def stop(signum: int, frame: object) -> None:
        with contextlib.suppress(Exception):  # the exit follows anyway
            spark.interruptTag(tag)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _is_connection_failure(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    markers = ("UNAVAILABLE", "RETRIES_EXCEEDED", "Connection refused", "failed to connect", "Socket closed")
    return any(s in text for s in markers)


def stage_from_stdin() -> list[str] | None:
    """Import the Connect client, then wait for the stage: its arguments and environment as one
    JSON line on stdin. None when the line never comes (the stage was not run by this process)."""
    import pyspark.sql.connect.functions  # the heavy part: pandas, pyarrow, gRPC
    import pyspark.sql.connect.session  # noqa: F401

    line = sys.stdin.readline()
    if not line.strip():
        return None
    message = json.loads(line)
    os.environ.clear()
    os.environ.update(message["env"])
    return [str(arg) for arg in message["args"]]


def _connection_cause(url: str, exc: BaseException) -> str:
    where = url.split(";")[0]  # never the token
    restarts = " and restarts the local server" if os.environ.get(CONNECT_LOCAL_VAR) == "1" else ""
    return (
        f"the Spark Connect server {where} stopped answering ({type(exc).__name__}); nothing was committed, "
        f"a retry runs the stage again{restarts}"
    )


_SERVER_DOWN = ("stopped SparkContext", "SparkContext was shut down")


def _server_oom_cause(stage: ResolvedStage, exc: BaseException, connection_lost: bool) -> str | None:
    """When the local Connect server died of an OutOfMemoryError under this stage: that, first."""
    if os.environ.get(CONNECT_LOCAL_VAR) != "1" or not (connection_lost or any(m in str(exc) for m in _SERVER_DOWN)):
        return None
    oom = out_of_memory(default_run_dir(Path(stage.home)))
    if oom is None:
        return None
    return (
        f"the local Spark Connect server ran out of memory ({oom}) and stopped; nothing was committed, a "
        "retry runs the stage again and restarts the server; give it a larger heap: "
        f"DAGSPEC_CONNECT_DRIVER_MEMORY (now {ServerSettings.from_env().driver_memory}), or fewer stages at once"
    )


def _refusal_cause(url: str, exc: BaseException) -> str | None:
    """When the server refused the client (no token, another token, an untrusted certificate): that."""
    text = str(exc)
    where = url.split(";")[0]
    if "UNAUTHENTICATED" in text:
        sent = (
            "sent no token" if "No authentication token provided" in text else "sent a token that is not the server's"
        )
        return (
            f"the Spark Connect server {where} refused this client (UNAUTHENTICATED): it {sent}; the server "
            "requires its token, the password of the Spark Connect connection (dagspec's local server: "
            ".dagspec/connect.token; docs/security.md)"
        )
    if "Tls handshake failed" in text or "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            f"TLS with the Spark Connect server {where} failed: a token is sent to a host other than localhost "
            "over TLS only, and the server must offer it with a certificate this client trusts "
            "(GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: docs/deployment.md)"
        )
    return None


def report_failure(stage: ResolvedStage, exc: Exception, url: str | None) -> None:
    """Log the failure (with its trace unless dagspec raised it on purpose), print the marker line
    with its root cause last, and record it beside the stage's checkpoints."""
    refused = _refusal_cause(url, exc) if url else None
    connection_lost = bool(url) and refused is None and _is_connection_failure(exc)
    server_oom = _server_oom_cause(stage, exc, connection_lost) if url else None
    if refused is not None:
        failure = StageFailure(stage.name, stage.kind, refused)
    elif server_oom is not None:
        failure = StageFailure(stage.name, stage.kind, server_oom)
    elif url and connection_lost:
        failure = StageFailure(stage.name, stage.kind, _connection_cause(url, exc))
    else:
        files: tuple[str, ...] = ()
        with contextlib.suppress(Exception):  # a courtesy: the message without it
            catalog = load_catalog(Path(stage.home))
            if stage.kind in catalog.files:
                source = Path(catalog.files[stage.kind])
                # under spark-submit a plugin is imported from the driver's copy (--py-files): the
                # plugins folder's file is the one to name
                own = plugins_dir(Path(stage.home)) / source.name
                files = (str(source.resolve()), *([str(own.resolve())] if own.is_file() else []))
        failure = stage_failure(
            exc, stage.name, stage.kind, stage.params_json(), code_files=files, home=Path(stage.home)
        )
    failure = StageFailure(failure.stage, failure.kind, redact_url(failure.cause), failure.param)
    trace = not isinstance(exc, DagspecError) and not connection_lost and refused is None  # else in the log
    log.error("stage %s failed: %s", stage.name, failure.cause, exc_info=exc if trace else None)
    announce(stage, failure)


def announce(stage: ResolvedStage, failure: StageFailure) -> None:
    """Print the failure's marker line and record it beside the stage's checkpoints."""
    print(failure.marker_line(), file=sys.stderr, flush=True)
    with contextlib.suppress(Exception):  # the record is a courtesy: the marker line above is the report
        write_record(stage.stage_dir, stage.fingerprint, failure)


class _RedactingFormatter(logging.Formatter):
    """Another formatter's output with Spark Connect tokens masked (``dagspec.plan.modes.redact_url``)."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return redact_url(self.inner.format(record))


def main(argv: list[str]) -> int:
    """Parse the argument (the stage's JSON, or ``@file`` holding it), start the session, run the stage
    (a partitioned stage: its partitions); 0 on success or a hit, 1 on failure."""
    if argv == [STAGE_ON_STDIN]:
        received = stage_from_stdin()
        if received is None:
            return 0
        argv = received
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # a traceback may quote a Connect URL with its token
        handler.setFormatter(_RedactingFormatter(handler.formatter))
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    if len(args) != 1:
        print("usage: run_stage.py [--force] STAGE_JSON", file=sys.stderr)
        return 2
    try:
        stage = ResolvedStage.from_json(Path(args[0][1:]).read_text() if args[0].startswith("@") else args[0])
    except PlanParamsError as exc:  # the kind's code changed since planning: nothing started yet
        print(StageFailure(exc.stage, exc.kind, exc.cause).marker_line(), file=sys.stderr, flush=True)
        return 1
    os.environ.setdefault("DAGSPEC_HOME", stage.home)
    url = os.environ.get(CONNECT_URL_VAR)
    try:
        app_name = f"dagspec.{stage.dag_id}.{stage.name}"
        spark = _connect_session(stage, url) if url else create_session(app_name)
        if not url:  # a driver of its own: never wait forever for executors
            watch_executors(spark, app_name, lambda cause: announce(stage, StageFailure(stage.name, stage.kind, cause)))
        try:
            with watch_progress(spark, stage, connect=bool(url)) as progress:
                if stage.partitioned:
                    return run_partitions(
                        spark,
                        stage,
                        force=force,
                        report=lambda part, exc: report_failure(part, exc, url),
                        attach=progress.attach if progress is not None else None,
                    )
                result = run_stage(spark, stage, force=force)
        finally:
            with contextlib.suppress(Exception):  # a dead Connect server cannot release the session
                spark.stop()
    except Exception as exc:  # reported, cause first; exit 1
        report_failure(stage, exc, url)
        return 1
    if result.outcome == "hit":
        log.info("checkpoint hit: %s", stage.checkpoint_dir)
    else:
        log.info(
            "committed %s (%s rows) in %.1f s",
            stage.checkpoint_dir,
            result.manifest["rows"],
            result.manifest["duration_s"],
        )
    return 0
