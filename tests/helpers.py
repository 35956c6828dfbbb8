"""Test helpers: run a stage in-process through the real runtime and commit protocol."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from dagspec.plan import ResolvedStage, default_context, resolve_pipeline
from dagspec.runtime import run_stage
from dagspec.spec import PipelineSpec, load_spec


def write_spec(folder: Path, text: str, name: str = "pipe.yaml") -> Path:
    """Write a dedented spec file and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run_pipeline_in_process(
    spark: Any, spec: PipelineSpec, params: dict[str, Any] | None = None
) -> dict[str, ResolvedStage]:
    """Run every stage in order in this process's SparkSession (no Airflow); returns the plan."""
    plan = resolve_pipeline(spec, default_context(spec, params))
    for stage in plan.values():
        run_stage(spark, stage)
    return plan


def load_and_run(spark: Any, path: Path, params: dict[str, Any] | None = None) -> dict[str, ResolvedStage]:
    """load_spec + run_pipeline_in_process."""
    return run_pipeline_in_process(spark, load_spec(path), params)


def manifest(stage: ResolvedStage) -> dict[str, Any]:
    """The committed manifest of a stage (local storage)."""
    return json.loads((Path(stage.checkpoint_dir) / "manifest.json").read_text())
