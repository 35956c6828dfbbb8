"""The one Airflow operator dagspec uses: a SparkSubmitOperator that knows about checkpoints.

At run time it resolves the pipeline with the run's params, logs whether the stage will run and
why, succeeds at once on a checkpoint hit, and otherwise submits ``jobs/run_stage.py`` with the
resolved stage as its only argument. All the spark-submit work (argv, master from the
connection, polling, kill) stays in the provider's hook.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from dagspec.errors import ConnectionMissingError, DagspecError
from dagspec.kinds.catalog import load_catalog
from dagspec.plan.reasons import is_hit, stage_status
from dagspec.plan.resolve import ResolvedStage, resolve_pipeline
from dagspec.spec.models import FORCE_PARAM, PipelineSpec

TEMPLATE_KEYS = (
    "ds",
    "ds_nodash",
    "ts",
    "ts_nodash",
    "run_id",
    "logical_date",
    "data_interval_start",
    "data_interval_end",
)


def template_context(context: Any) -> dict[str, Any]:
    """The part of Airflow's context a spec's templates may use."""
    values = {key: context.get(key) for key in TEMPLATE_KEYS if context.get(key) is not None}
    values["params"] = dict(context.get("params") or {})
    return values


def is_true(value: Any) -> bool:
    """Truthiness of a param that may arrive as a bool or a string from a form or ``-p``."""
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def spark_submit_binary() -> str:
    """spark-submit of this environment: on PATH, else beside the running Python."""
    found = shutil.which("spark-submit")
    return found or str(Path(sys.executable).parent / "spark-submit")


class DagspecStageOperator(SparkSubmitOperator):
    """Run one stage of a pipeline, unless its checkpoint already exists."""

    # Nothing of this operator is rendered by Airflow's Jinja: a spec's own templates are rendered
    # by dagspec's sandbox, and a conf value or argument containing `{{ conn... }}` stays literal
    # (no secret can be templated into the spark-submit argv or the task log).
    template_fields: Sequence[str] = ()
    ui_color = "#e8f1fb"

    def __init__(self, *, spec: PipelineSpec, stage_name: str, home: str, jobs_dir: str, **kwargs: Any) -> None:
        super().__init__(application=str(Path(jobs_dir) / "run_stage.py"), **kwargs)
        self.spec = spec
        self.stage_name = stage_name
        self.home = home

    def resolve(self, context: Any) -> ResolvedStage:
        """This task's stage, resolved with the run's params."""
        try:
            return resolve_pipeline(self.spec, template_context(context), home=Path(self.home))[self.stage_name]
        except DagspecError as exc:
            raise AirflowException(str(exc)) from None

    def execute(self, context: Any) -> None:
        stage = self.resolve(context)
        force = is_true(context["params"].get(FORCE_PARAM, False))
        status = stage_status(stage, forced=force)
        self.log.info("%s", status.line(stage))
        if status.done:
            self.log.info("checkpoint hit: %s; nothing to run", stage.checkpoint_dir)
            return
        self._check_connection()
        self.prepare_submit(stage, force=force)
        super().execute(context)
        if not is_hit(stage):
            raise AirflowException(f"spark-submit returned but {stage.checkpoint_dir} is not a complete checkpoint")

    def prepare_submit(self, stage: ResolvedStage, *, force: bool) -> None:
        """Set what spark-submit gets: the stage as its argument, the environment, a user kind's module."""
        self.application_args = (["--force"] if force else []) + [stage.to_json()]
        self._spark_binary = self._spark_binary or spark_submit_binary()
        self.env_vars = {**self._default_env(), **(self.env_vars or {})}
        catalog = load_catalog(Path(self.home))
        if catalog.origins.get(stage.kind, "").startswith("plugin "):
            # executors unpickle the kind's closures by module name: ship the plugin file to them
            self.py_files = catalog.files[stage.kind]

    def _check_connection(self) -> None:
        from airflow.sdk import BaseHook

        try:
            BaseHook.get_connection(self._conn_id)
        except AirflowNotFoundException:
            raise ConnectionMissingError(
                f"Airflow connection {self._conn_id!r} does not exist; without it the Spark provider silently "
                f"submits to YARN. Create it, e.g. `airflow connections add {self._conn_id} --conn-type spark "
                f"--conn-host 'local[*]'` (or spark://host:7077, yarn, k8s://...), or run through `dagspec run`."
            ) from None

    def _default_env(self) -> dict[str, str]:
        env = {
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
            "DAGSPEC_HOME": self.home,
            **{k: os.environ[k] for k in ("DAGSPEC_PLUGINS",) if os.environ.get(k)},
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        master = self._get_hook()._connection["master"]
        if master.startswith("local") or "127.0.0.1" in master or "localhost" in master:
            env["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
        return env
