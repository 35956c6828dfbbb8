"""Test helpers: run a stage in-process through the real runtime and commit protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagspec.errors import SpecValidationError
from dagspec.job.partitions import run_partitions
from dagspec.job.runtime import run_stage
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from dagspec.spec.models import PipelineSpec

REPO = Path(__file__).resolve().parents[1]
DAGSPEC = str(Path(sys.executable).parent / "dagspec")


def write_spec(folder: Path, text: str, name: str = "pipe.yaml") -> Path:
    """Write a dedented spec file and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run_pipeline_in_process(
    spark: Any, spec: PipelineSpec, params: dict[str, Any] | None = None
) -> dict[str, ResolvedStage]:
    """Run every stage in order in this process's SparkSession (no Airflow); returns the plan.

    Each stage is resolved again before it runs, as each Airflow task does: its key holds the
    content its upstream stages committed."""
    context = default_context(spec, params)
    plan = resolve_pipeline(spec, context)
    for name in plan:
        plan = resolve_pipeline(spec, context)
        run_one(spark, plan[name])
    return resolve_pipeline(spec, context)


def run_one(spark: Any, stage: ResolvedStage) -> None:
    """Run one resolved stage (a partitioned one: each of its partitions, failures raised)."""
    if not stage.partitioned:
        run_stage(spark, stage)
        return

    def fail(part: ResolvedStage, exc: Exception) -> None:
        raise exc

    if run_partitions(spark, stage, force=False, report=fail, parallel=2) != 0:
        raise AssertionError(f"a partition of {stage.name} failed")


def run_stages(
    spark: Any, spec: PipelineSpec, names: list[str] | tuple[str, ...], params: dict[str, Any] | None = None
) -> dict[str, ResolvedStage]:
    """Run the named stages in order, each resolved after the ones before it committed; returns the plan."""
    context = default_context(spec, params)
    for name in names:
        run_one(spark, resolve_pipeline(spec, context)[name])
    return resolve_pipeline(spec, context)


def load_and_run(spark: Any, path: Path, params: dict[str, Any] | None = None) -> dict[str, ResolvedStage]:
    """load_spec + run_pipeline_in_process."""
    return run_pipeline_in_process(spark, load_spec(path), params)


def manifest(stage: ResolvedStage) -> dict[str, Any]:
    """The committed manifest of a stage (local storage)."""
    return json.loads((Path(stage.checkpoint_dir) / "manifest.json").read_text())


def parquet_table(spark, tmp_path: Path, rows: int, classes: dict[int, float] | None = None) -> Path:
    """A Parquet table of ``rows`` rows with an id and a label drawn with the given class shares."""
    from pyspark.sql import functions as F

    df = spark.range(rows).withColumn("u", F.rand(3))
    label = F.lit(0)
    if classes:  # the first class whose cumulative share is above u
        label = F.lit(max(classes))
        for value, cumulative in reversed(list(cumulative_shares(classes))):
            label = F.when(F.col("u") < cumulative, F.lit(value)).otherwise(label)
    path = tmp_path / f"t{rows}"
    df.withColumn("label", label).drop("u").repartition(5).write.parquet(str(path))
    return path


def spec_over_table(
    spark: Any, tmp_path: Path, rows: int, stages: str, classes: dict[int, float] | None = None
) -> Path:
    """``<tmp_path>/p/pipe.yaml``: a stage ``raw`` reading a new Parquet table (``parquet_table``),
    then ``stages``, the YAML of the other stages (as written under ``stages:``)."""
    return spec_reading(tmp_path / "p", parquet_table(spark, tmp_path, rows, classes), stages)


def spec_reading(folder: Path, path: Path | str, stages: str, read: str = "format: parquet") -> Path:
    """``<folder>/pipe.yaml``: a stage ``raw`` reading ``path`` (``read``: its other params), then
    ``stages``, the YAML of the other stages (as written under ``stages:``)."""
    raw = f'  raw: {{kind: read, params: {{{read}, path: "{path}"}}}}\n'
    return write_spec(folder, "stages:\n" + raw + textwrap.indent(textwrap.dedent(stages).strip("\n"), "  ") + "\n")


def cumulative_shares(classes: dict[int, float]) -> Iterator[tuple[int, float]]:
    edge = 0.0
    for value, share in sorted(classes.items()):
        edge += share
        yield value, edge


def cli_env(airflow_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``dagspec`` command a test runs: this one's without Airflow's and
    dagspec's settings (but the session's Connect port), the repository as the project, its own
    Airflow home, and ``extra``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), **extra)
    return env


def dagspec_cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``dagspec <args>`` from the repository, its output captured."""
    return subprocess.run([DAGSPEC, *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def spec_issues(tmp_path: Path, text: str, name: str = "pipe.yaml") -> list[str]:
    """The issues ``dagspec validate`` finds in ``text`` written as ``<tmp_path>/<name>`` and
    shown as ``pipelines/<name>``."""
    with pytest.raises(SpecValidationError) as info:
        load_spec(write_spec(tmp_path, text, name), f"pipelines/{name}")
    return [str(issue) for issue in info.value.issues]
