"""The one Airflow operator dagspec uses: a SparkSubmitOperator that knows about checkpoints.

At run time it resolves the pipeline with the run's params, logs whether the stage will run and
why, succeeds at once on a checkpoint hit, and otherwise runs ``jobs/run_stage.py`` with the
resolved stage as its only argument, in the mode its connection chooses (``dagspec.plan.modes``):

- a ``spark`` connection: spark-submit, a driver per stage. All the spark-submit work (argv,
  master from the connection, polling, kill) stays in the provider's hook.
- a ``spark_connect`` connection: a Python process that is a client of the Connect server (the
  provider's SparkConnectHook builds the URL; it reaches the process through its environment).
  A stage that needs a driver of its own is spark-submitted through the ``spark`` connection
  named by the Connect connection's extra ``submit_conn_id``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException, AirflowSkipException

from dagspec import jvm, storage
from dagspec.airflow.client_process import start_client, stop
from dagspec.airflow.links import SparkUILink
from dagspec.errors import ConnectionMissingError, DagspecError
from dagspec.kinds.catalog import load_catalog
from dagspec.plan.events import asset_extra
from dagspec.plan.failure import StageFailure, clear_record, failure_line, find_failure, read_record, write_record
from dagspec.plan.history import stage_record, write_stage_record
from dagspec.plan.modes import (
    CONNECT,
    CONNECT_CONN_TYPE,
    ExecutionMode,
    execution_mode,
    is_driver_here,
    is_local_server,
    is_server_on_this_machine,
    redact_url,
)
from dagspec.plan.partitions import RUN_PARTITION_KEY, partitioned_manifest, run_scope
from dagspec.plan.reasons import is_hit, stage_status
from dagspec.plan.resolve import ResolvedStage, resolve_pipeline
from dagspec.spec.models import FORCE_PARAM, PipelineSpec
from dagspec.spec.params import RUN_CONTEXT_KEYS, is_true
from dagspec.spec.partitions import PARTITIONS_PARAM

MAX_ARGUMENT = 100_000  # characters of stage JSON passed as an argument; longer goes through a file
SUBMIT_CONN_EXTRA = "submit_conn_id"  # Connect connection extra: the spark connection of own-driver stages


def template_context(context: Any) -> dict[str, Any]:
    """The part of Airflow's context a spec's templates may use."""
    values = {key: context.get(key) for key in RUN_CONTEXT_KEYS if context.get(key) is not None}
    values["params"] = dict(context.get("params") or {})
    # Airflow's partition of the run (a partitioned timetable, a trigger with one): the run stands
    # for it and the partitions before it (dagspec.plan.partitions.RunScope)
    dag_run = context.get("dag_run")
    key = context.get(RUN_PARTITION_KEY) or getattr(dag_run, RUN_PARTITION_KEY, None)
    if key:
        values[RUN_PARTITION_KEY] = str(key)
    return values


def stage_asset(dag_id: str, stage: str, output: str) -> Asset:
    """The Airflow asset of one output of a stage (its task's outlet)."""
    return Asset(name=f"{dag_id}.{stage}.{output}", uri=f"dagspec://{dag_id}/{stage}/{output}")


def spark_submit_binary() -> str:
    """spark-submit of this environment: on PATH, else beside the running Python."""
    found = shutil.which("spark-submit")
    return found or str(Path(sys.executable).parent / "spark-submit")


def stage_argument(stage: ResolvedStage) -> str:
    """The job's argument: the stage's JSON, or ``@<file>`` holding it when it is too long for one
    argument (Linux: 128 KiB; a stage of many partitions), written beside the stage's checkpoints."""
    text = stage.to_json()
    if len(text) < MAX_ARGUMENT:
        return text
    path = f"{stage.stage_dir}/_plan-{stage.fingerprint}.json"
    storage.write_text(path, text)
    return f"@{path}"


class DagspecStageOperator(SparkSubmitOperator):
    """Run one stage of a pipeline, unless its checkpoint already exists."""

    # Nothing of this operator is rendered by Airflow's Jinja: a spec's own templates are rendered
    # by dagspec's sandbox, and a conf value or argument containing `{{ conn... }}` stays literal
    # (no secret can be templated into the spark-submit argv or the task log).
    template_fields: Sequence[str] = ()
    ui_color = "#e8f1fb"
    operator_extra_links = (SparkUILink(),)

    def __init__(self, *, spec: PipelineSpec, stage_name: str, home: str, jobs_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(Path(jobs_dir) / "run_stage.py"), **kwargs)
        self.spec = spec
        self.stage_name = stage_name
        self.home = home

    def resolve(self, context: Any) -> ResolvedStage:
        """This task's stage, resolved with the run's params."""
        try:
            self._resolved = resolve_pipeline(self.spec, template_context(context), home=Path(self.home))[
                self.stage_name
            ]
            return self._resolved
        except DagspecError as exc:
            # the cause first, where `dagspec run` and the task log's reader look (a marker line):
            # e.g. a query that a run's params render into one the sql kind refuses
            written = self.spec.stages.get(self.spec.written_stage(self.stage_name))
            cause = f"the spec with this run's params is refused: {exc}"
            self.log.error("%s", StageFailure(self.stage_name, written.kind if written else "?", cause).marker_line())
            raise AirflowException(str(exc)) from None

    def execute(self, context: Any) -> None:
        ti, link = context.get("ti"), self.operator_extra_links[0]
        if ti is not None:  # the link is there while the stage runs, not only once it ended
            ti.xcom_push(key=link.xcom_key, value=link.get_link(self, ti_key=ti))
        stage = self.resolve(context)
        if stage.blocked:  # another spec's output it reads was never committed
            raise AirflowException(f"stage {stage.name!r}: {'; '.join(stage.blocked)}")
        scope = run_scope(self.spec, template_context(context))
        if scope.limited and not stage.partitioned:
            raise AirflowSkipException(
                f"this run computes partitions {context['params'].get(PARTITIONS_PARAM)} of the partitioned stages "
                f"only (run param {PARTITIONS_PARAM!r}); stage {stage.name!r} is not partitioned"
            )
        force = is_true(context["params"].get(FORCE_PARAM, False))
        status = stage_status(stage, forced=force)
        self.log.info("%s", status.line(stage))
        if status.done:
            self.log.info("checkpoint hit: %s; nothing to run", stage.checkpoint_dir)
            if not stage.partitioned:
                stage.checkpoint.point_latest()  # what this run stands for is what other specs read
            self.record(stage, context)
            return
        planned = stage
        if stage.partitioned:  # the job gets the partitions to compute only
            stage = stage.model_copy(update={"partitions": {k: stage.partitions[k] for k in status.todo}})
        connection = self._connection(self._conn_id)
        mode = self.mode_of(stage, connection)
        self.log.info("stage %s: %s", stage.name, mode.line)
        if mode.mode == CONNECT:
            self.run_connect_client(stage, force=force, extra=connection.extra_dejson)
        else:
            if connection.conn_type == CONNECT_CONN_TYPE:
                self._conn_id = self._submit_conn_id(connection.extra_dejson, stage.name, mode)
                self._connection(self._conn_id)
            self.prepare_submit(stage, force=force)
            self.submit(stage, context)
        if not is_hit(stage):
            raise AirflowException(f"the stage returned but {stage.checkpoint_dir} is not a complete checkpoint")
        self.record(planned, context)

    def record(self, stage: ResolvedStage, context: Any) -> None:
        """What this run ran of the stage: its run record (``dagspec.plan.history``, what the UI shows
        of the run) and each output's asset event, both from the committed manifest."""
        manifest: dict[str, Any]
        if stage.partitioned:
            manifest = {"stage": stage.name, "kind": stage.kind, "fingerprint": stage.fingerprint}
            manifest.update(partitioned_manifest(stage.partitions, str(context["run_id"])))
        else:
            manifest = stage.checkpoint.manifest() or {}
        ti = context.get("ti")
        written = write_stage_record(
            stage.storage_root,
            stage_record(stage, manifest, str(context["run_id"]), getattr(ti, "try_number", None)),
        )
        self.log.info("run record: %s", written)
        events = context["outlet_events"]
        for output in self.spec.outputs_of(self.stage_name):
            extra = asset_extra(manifest, output, stage.output_path(output))
            event = events[stage_asset(self.spec.dag_id, self.stage_name, output)]
            event.extra = extra
            computed = (manifest.get("metrics") or {}).get("partitions_computed") or []
            if computed:  # Airflow's partitioned asset events: one per partition this run computed
                event.add_partitions([str(key) for key in computed])

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The stage's inputs and outputs for Airflow's OpenLineage provider (``dagspec.airflow.lineage``):
        also on a checkpoint hit, since the task stands for the checkpoint either way."""
        from dagspec.airflow.lineage import stage_lineage  # the provider's imports only when lineage is on

        stage: ResolvedStage | None = getattr(self, "_resolved", None)
        return stage_lineage(stage) if stage is not None else None

    def mode_of(self, stage: ResolvedStage, connection: Any) -> ExecutionMode:
        """The stage's execution mode under ``connection`` (an Airflow Connection)."""
        kind = load_catalog(Path(self.home)).get(stage.kind)
        if kind is None:
            raise AirflowException(f"stage {stage.name!r}: unknown kind {stage.kind!r}")
        return execution_mode(
            kind,
            stage.conf,
            connection.conn_type,
            self._conn_id,
            params=stage.params,
            server_on_this_machine=is_server_on_this_machine(connection.host, connection.extra_dejson),
            driver_here=self._driver_here(connection),
        )

    def _driver_here(self, connection: Any) -> bool:
        """Would a driver of the stage's own start in this task's process tree (client deploy mode)?"""
        if connection.conn_type != CONNECT_CONN_TYPE:
            return True
        submit = connection.extra_dejson.get(SUBMIT_CONN_EXTRA)
        if not submit:
            return is_driver_here(None)
        try:
            return is_driver_here(self._connection(str(submit)).extra_dejson)
        except ConnectionMissingError:
            return False  # a stage that needs it fails when it submits, with that connection's name

    def _submit_conn_id(self, extra: dict[str, Any], stage_name: str, mode: ExecutionMode) -> str:
        submit = extra.get(SUBMIT_CONN_EXTRA)
        if not submit:
            raise ConnectionMissingError(
                f"stage {stage_name!r} {mode.reason}, but the Spark Connect connection {self._conn_id!r} names no "
                f"spark connection to submit it with: set its extra {SUBMIT_CONN_EXTRA!r} to the id of a `spark` "
                f"connection (local[*], spark://..., yarn, k8s://...)"
            )
        return str(submit)

    def connect_client_command(self, stage: ResolvedStage, *, force: bool, extra: dict[str, Any]) -> list[str]:
        """argv of the Connect client process (the URL, which may hold a token, goes in its environment)."""
        return [sys.executable, self.application, *(["--force"] if force else []), stage_argument(stage)]

    def connect_client_env(self, extra: dict[str, Any]) -> dict[str, str]:
        """Environment of the Connect client process: this one's, the project's, and the server's URL."""
        env = {**os.environ, **self._base_env()}
        env["DAGSPEC_CONNECT_URL"] = SparkConnectHook(conn_id=self._conn_id).get_connection_url()
        env["DAGSPEC_CONNECT_LOCAL"] = "1" if is_local_server(extra) else "0"
        return env

    def run_connect_client(self, stage: ResolvedStage, *, force: bool, extra: dict[str, Any]) -> None:
        """Run the stage as a client of the Connect server; its output goes to the task log."""
        argv = self.connect_client_command(stage, force=force, extra=extra)
        self._client, ahead = start_client(argv[:2], argv[2:], self.connect_client_env(extra))
        how = "started ahead, stage sent on stdin" if ahead else "started now"
        self.log.info("Connect client (%s): %s %s <stage JSON>", how, argv[0], " ".join(argv[1:-1]))
        assert self._client.stdout is not None
        failure = None
        try:
            for line in self._client.stdout:
                self.log.info("%s", redact_url(line.rstrip()))  # Airflow masks the connection's token; any other too
                failure = find_failure([line]) or failure
            code = self._client.wait()
        except BaseException:  # re-raised: an interrupt (Ctrl-C of dagspec run) must not leave the client running
            stop(self._client)
            raise
        if code != 0:
            self.fail(stage, failure, f"Connect client exit code {code}")

    def submit(self, stage: ResolvedStage, context: Any) -> None:
        """spark-submit the stage through the provider's hook; a failure says its root cause first."""
        with contextlib.suppress(Exception):  # a previous attempt's record must not be taken for this one's
            clear_record(stage.stage_dir, stage.fingerprint)
        try:
            super().execute(context)
        except AirflowException as exc:
            failure = None
            with contextlib.suppress(Exception):  # a courtesy: the exit code remains
                failure = read_record(stage.stage_dir, stage.fingerprint)
            code = re.search(r"Error code is: (-?\d+)", str(exc))
            self.fail(stage, failure, f"spark-submit exit code {code.group(1)}" if code else "spark-submit failed")

    def fail(self, stage: ResolvedStage, failure: StageFailure | None, how: str) -> NoReturn:
        """Raise the task's failure: the stage's root cause with the spec's file:line first, then how
        the process ended; the job's full output is in the lines above."""
        if failure is None:
            raise AirflowException(f"stage {stage.name!r} failed ({how}); see the lines above")
        line = failure_line(self.spec, failure)
        with contextlib.suppress(Exception):  # a courtesy: raised below anyway
            write_record(stage.stage_dir, stage.fingerprint, failure, line)
        raise AirflowException(f"{line}\n({how}; the full trace is in the lines above)")

    def on_kill(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None and client.poll() is None:
            os.killpg(client.pid, 15)
            return
        super().on_kill()

    def prepare_submit(self, stage: ResolvedStage, *, force: bool) -> None:
        """Set what spark-submit gets: the stage as its argument, the environment, a user kind's module."""
        self.application_args = (["--force"] if force else []) + [stage_argument(stage)]
        self._spark_binary = self._spark_binary or spark_submit_binary()
        self.env_vars = {**self._submit_env(), **(self.env_vars or {})}
        catalog = load_catalog(Path(self.home))
        if catalog.origins.get(stage.kind, "").startswith("plugin "):
            # executors unpickle the kind's closures by module name: ship the plugin file to them
            self.py_files = catalog.files[stage.kind]

    def _connection(self, conn_id: str) -> Any:
        from airflow.sdk import BaseHook

        try:
            return BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            raise ConnectionMissingError(
                f"Airflow connection {conn_id!r} does not exist; without it the Spark provider silently "
                f"submits to YARN. Create it, e.g. `airflow connections add {conn_id} --conn-type spark "
                f"--conn-host 'local[*]'` (or spark://host:7077, yarn, k8s://...; or --conn-type spark_connect "
                f"--conn-host sc://host --conn-port 15002), or run through `dagspec run`."
            ) from None

    def _base_env(self) -> dict[str, str]:
        return {
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
            "DAGSPEC_HOME": self.home,
            **{k: os.environ[k] for k in ("DAGSPEC_PLUGINS",) if os.environ.get(k)},
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def _submit_env(self) -> dict[str, str]:
        env = {**self._base_env(), **jvm.jvm_env()}
        master = self._get_hook()._connection["master"]
        if master.startswith("local") or "127.0.0.1" in master or "localhost" in master:
            env["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
        return env
