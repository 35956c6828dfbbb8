"""Spec -> Airflow DAG. No pyspark, tensorflow or xgboost here: Airflow imports this every 30 s."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param

from dagspec.airflow.operator import DagspecStageOperator
from dagspec.errors import SpecError, SpecIssue, SpecValidationError
from dagspec.kinds.catalog import load_catalog
from dagspec.spec.loader import load_spec, spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec, parse_ref


def _as_datetime(value: dt.date | dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _params(spec: PipelineSpec) -> dict[str, Param]:
    params = {name: Param(p.default, description=p.description, **p.json_schema()) for name, p in spec.params.items()}
    params.setdefault(
        FORCE_PARAM,
        Param(False, type="boolean", description="Recompute every stage even if its checkpoint exists"),
    )
    return params


def _stage_doc(spec: PipelineSpec, name: str) -> str:
    stage = spec.stages[name]
    kind = load_catalog().get(stage.kind)
    summary = stage.description or (kind.description if kind else "")
    return f"**{name}** (`{stage.kind}`): {summary}\n\n```json\n{json.dumps(stage.params, indent=1, default=str)}\n```"


def compile_pipeline(spec: PipelineSpec, *, home: Path, jobs_dir: Path | None = None) -> DAG:
    """Build the DAG: one DagspecStageOperator per stage, edges from inputs, outputs as Assets."""
    jobs = str(jobs_dir or home / "jobs")
    args = spec.default_args
    default_args: dict[str, Any] = {
        "owner": args.owner,
        "retries": args.retries,
        "retry_delay": dt.timedelta(seconds=args.retry_delay),
        "retry_exponential_backoff": args.retry_exponential_backoff,
    }
    if args.execution_timeout:
        default_args["execution_timeout"] = dt.timedelta(seconds=args.execution_timeout)
    dag = DAG(
        dag_id=spec.dag_id,
        description=spec.description,
        schedule=spec.schedule,
        start_date=_as_datetime(spec.start_date),
        catchup=spec.catchup,
        tags=["dagspec", *spec.tags],
        default_args=default_args,
        params=_params(spec),
        doc_md=f"{spec.description or ''}\n\nCompiled by dagspec from `{spec.source}`.",
        max_active_runs=1,
    )
    tasks: dict[str, DagspecStageOperator] = {}
    with dag:
        for name in spec.stage_order():
            stage = spec.stages[name]
            conf = {**spec.spark.conf, **(stage.spark.conf if stage.spark else {})}
            resources = spec.spark.resources.merged(stage.spark.resources if stage.spark else None)
            overrides: dict[str, Any] = {}
            if stage.retries is not None:
                overrides["retries"] = stage.retries
            if stage.execution_timeout is not None:
                overrides["execution_timeout"] = dt.timedelta(seconds=stage.execution_timeout)
            tasks[name] = DagspecStageOperator(
                task_id=name,
                spec=spec,
                stage_name=name,
                home=str(home),
                jobs_dir=jobs,
                conn_id=spec.spark.conn_id,
                conf={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()},
                driver_memory=resources.driver_memory,
                executor_memory=resources.executor_memory,
                executor_cores=resources.executor_cores,
                num_executors=resources.num_executors,
                total_executor_cores=resources.total_executor_cores,
                name=f"dagspec.{spec.dag_id}.{name}",
                outlets=[
                    Asset(name=f"{spec.dag_id}.{name}.{output}", uri=f"dagspec://{spec.dag_id}/{name}/{output}")
                    for output in spec.outputs_of(name)
                ],
                doc_md=_stage_doc(spec, name),
                **overrides,
            )
            for ref in stage.inputs.values():
                tasks[parse_ref(ref)[0]] >> tasks[name]
    return dag


@dataclass
class CompiledFolder:
    """Every DAG that compiled, and the errors of the specs that did not."""

    dags: dict[str, DAG] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)


def compile_folder(folder: Path, *, home: Path, jobs_dir: Path | None = None) -> CompiledFolder:
    """Compile every spec in ``folder``; a broken spec is recorded, never fatal to the others."""
    result = CompiledFolder()
    for path in spec_files(folder):
        display = os.path.relpath(path, home) if path.is_relative_to(home) else str(path)
        try:
            spec = load_spec(path, display)
        except SpecError as exc:
            result.errors.append(exc)
            continue
        if spec.dag_id in result.dags:
            result.errors.append(_duplicate_dag_id(spec, display))
            continue
        result.dags[spec.dag_id] = compile_pipeline(spec, home=home, jobs_dir=jobs_dir)
    return result


def _duplicate_dag_id(spec: PipelineSpec, display: str) -> SpecError:
    return SpecValidationError([SpecIssue(display, 1, 1, "dag_id", f"dag_id {spec.dag_id!r} is used by another spec")])


class InvalidSpecsDag(DAG):
    """Stands in for broken specs so Airflow lists them as import errors of the DAG file.

    Airflow records an exception raised while validating a DAG as an import error of the file
    that defined it and still loads every other DAG of that file; raising at module level
    would drop them all.
    """

    spec_errors: list[SpecError]

    def validate(self) -> None:
        raise SpecError([issue for error in self.spec_errors for issue in error.issues])


def invalid_specs_dag(errors: Iterable[SpecError]) -> DAG:
    """A placeholder DAG whose validation fails with every spec error (see InvalidSpecsDag)."""
    dag = InvalidSpecsDag(dag_id="dagspec_invalid_specs", schedule=None)
    dag.spec_errors = list(errors)
    return dag
