"""Spec -> Airflow DAG. No pyspark, tensorflow or xgboost here: Airflow imports this every 30 s."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, TaskGroup

from dagspec.airflow.operator import DagspecStageOperator, stage_asset
from dagspec.airflow.schedule import dag_schedule
from dagspec.errors import SpecError
from dagspec.kinds.catalog import load_catalog
from dagspec.spec.loader import pipelines_dir, spec_files
from dagspec.spec.models import FORCE_PARAM, INVALID_SPECS_DAG_ID, PipelineSpec, parse_ref
from dagspec.spec.partitions import PARTITIONS_PARAM
from dagspec.spec.together import crash_error, load_specs


def _as_datetime(value: dt.date | dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _params(spec: PipelineSpec) -> dict[str, Param]:
    fixed = spec.matrix_params()
    params = {
        name: Param(
            p.default,
            description=" ".join(
                filter(None, [p.description, "(fixed: a matrix is built from it)" if name in fixed else None])
            ),
            **p.json_schema(),
        )
        for name, p in spec.params.items()
    }
    params.setdefault(
        FORCE_PARAM,
        Param(False, type="boolean", description="Recompute every stage even if its checkpoint exists"),
    )
    if spec.partitions is not None:
        params[PARTITIONS_PARAM] = Param(
            None,
            type=["string", "null"],
            description="Backfill: compute only these partitions of the partitioned stages (KEY, FROM..TO, FROM.. "
            "or ..TO) and skip the other stages; empty: a normal run (every missing partition, then the rest)",
        )
    return params


def _stage_doc(spec: PipelineSpec, name: str) -> str:
    stage = spec.stages[name]
    kind = load_catalog().get(stage.kind)
    summary = stage.description or (kind.description if kind else "")
    values = spec.matrix_of(name)
    matrix = f"\n\nmatrix: `{json.dumps(values)}`" if values else ""
    params = json.dumps(stage.params, indent=1, default=str)
    return f"**{name}** (`{stage.kind}`): {summary}{matrix}\n\n```json\n{params}\n```"


def _matrix_groups(spec: PipelineSpec) -> dict[str, TaskGroup]:
    """One TaskGroup per matrix stage; task ids stay the expansions' names (no group prefix)."""
    return {
        written: TaskGroup(
            group_id=written,
            prefix_group_id=False,
            tooltip=f"matrix stage {written}: {len(expansions)} expansions",
        )
        for written, expansions in spec.matrix_groups().items()
    }


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
        schedule=dag_schedule(spec, home),
        start_date=_as_datetime(spec.start_date),
        catchup=spec.catchup,
        tags=["dagspec", *spec.tags],
        default_args=default_args,
        params=_params(spec),
        doc_md=f"{spec.description or ''}\n\nCompiled by dagspec from `{spec.source}`.",
        max_active_runs=spec.max_active_runs,
        auto_register=False,  # registered by compile_folder once complete: a half-built DAG never is
    )
    tasks: dict[str, DagspecStageOperator] = {}
    with dag:
        groups = _matrix_groups(spec)
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
                outlets=[stage_asset(spec.dag_id, name, output) for output in spec.outputs_of(name)],
                # another spec's outputs it reads: the Assets view draws the specs joined whatever the schedule
                inlets=[stage_asset(ref.spec, ref.stage, ref.output_name) for ref in stage.spec_inputs().values()],
                doc_md=_stage_doc(spec, name),
                task_group=groups.get(spec.written_stage(name)),
                **overrides,
            )
            for ref in stage.stage_refs().values():
                tasks[parse_ref(ref)[0]] >> tasks[name]
    return dag


@dataclass
class CompiledFolder:
    """Every DAG that compiled, and the errors of the specs that did not.

    Airflow marks every DAG of a file that has an import error stale (hidden from the UI and the
    REST API, never scheduled), so the two halves go to two DAG files: ``register_dags`` in
    ``dags/dagspec_pipelines.py``, ``register_errors`` in ``dags/dagspec_spec_errors.py``.
    """

    dags: dict[str, DAG] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)

    def register_dags(self) -> dict[str, DAG]:
        """Hand every compiled DAG to Airflow, and none of the errors."""
        return {dag_id: register(dag) for dag_id, dag in self.dags.items()}

    def register_errors(self) -> list[SpecError]:
        """Hand Airflow the stand-in DAG failing with every spec error (none when all compiled)."""
        if self.errors:
            register(invalid_specs_dag(self.errors))
        return self.errors


def compile_folder(folder: Path, *, home: Path, jobs_dir: Path | None = None) -> CompiledFolder:
    """Compile every spec in ``folder``; a broken spec is recorded, never fatal to the others.

    Any exception while loading or compiling one spec (a bug of ours, a RecursionError) becomes
    that file's error. Two specs with one ``dag_id`` are both errors, each naming the other: file
    order must not decide which pipeline a dag_id runs. Nothing is registered with Airflow here
    (see ``CompiledFolder``): a half-built DAG never is.
    """
    result = CompiledFolder()
    for loaded in load_specs(spec_files(folder), lambda path: _display(path, home), home=home):
        if loaded.spec is None:
            result.errors += [loaded.error] if loaded.error else []
            continue
        try:
            dag = compile_pipeline(loaded.spec, home=home, jobs_dir=jobs_dir)
        except SpecError as exc:
            result.errors.append(exc)
            continue
        except Exception as exc:  # one spec must never take the others down, whatever it raises
            result.errors.append(crash_error(loaded.file, exc))
            continue
        result.dags[loaded.spec.dag_id] = dag
    return result


def compile_project(dag_file: str) -> CompiledFolder:
    """What a DAG file of ``<home>/dags`` compiles: the specs of ``$DAGSPEC_PIPELINES`` or
    ``<home>/pipelines``, where home is ``$DAGSPEC_HOME`` or the folder above ``dags/``."""
    home = Path(os.environ.get("DAGSPEC_HOME") or Path(dag_file).resolve().parents[1])
    return compile_folder(pipelines_dir(home), home=home)


def _display(path: Path, home: Path) -> str:
    return os.path.relpath(path, home) if path.is_relative_to(home) else str(path)


def register(dag: DAG) -> DAG:
    """Hand a complete DAG to Airflow without naming it in the DAG file's namespace.

    While Airflow imports a DAG file it collects every DAG that leaves a ``with dag:`` block
    (``auto_register``), so no user-chosen ``dag_id`` ever becomes a module global.
    """
    dag.auto_register = True
    with dag:
        pass
    return dag


class InvalidSpecsDag(DAG):
    """Stands in for broken specs so Airflow lists their errors as an import error of its DAG file.

    Airflow records an exception raised while validating a DAG as an import error of the file that
    defined it, with the message only (``SpecError: <file>:<line>:<col>: <field>: ...``, no
    traceback, unlike an exception raised at module level). It also marks every DAG of that file
    stale (``_update_import_errors`` in airflow/dag_processing/collection.py), so the stand-in is
    the only DAG of its file, ``dags/dagspec_spec_errors.py``, never of the file of the good DAGs.
    """

    spec_errors: list[SpecError]

    def validate(self) -> None:
        raise SpecError([issue for error in self.spec_errors for issue in error.issues])


def invalid_specs_dag(errors: Iterable[SpecError]) -> DAG:
    """A placeholder DAG whose validation fails with every spec error (see InvalidSpecsDag)."""
    dag = InvalidSpecsDag(dag_id=INVALID_SPECS_DAG_ID, schedule=None, auto_register=False)
    dag.spec_errors = list(errors)
    return dag
