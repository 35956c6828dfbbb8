"""Inside a spark-submit job: read inputs, call the stage function, commit the checkpoint.

The commit protocol (the only way a checkpoint becomes trusted):
1. every output and ``manifest.json`` are written under ``<stage_dir>/_tmp-<fingerprint>-<uuid>``;
2. that directory is renamed to ``<stage_dir>/<fingerprint>`` (a stale one is moved aside first);
3. ``_SUCCESS`` is created inside it, last.
A job killed at any point leaves no ``_SUCCESS``, so nothing half-written is ever read.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagspec.errors import DagspecError
from dagspec.plan import MANIFEST, SUCCESS_MARKER, ResolvedStage, is_uri
from dagspec.registry import IOType, StageParams, get_kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("dagspec.stage")


class HadoopFS:
    """The few filesystem operations a commit needs, on any Hadoop URI, through Spark's JVM."""

    def __init__(self, spark: SparkSession, any_path: str) -> None:
        jvm = spark._jvm  # type: ignore[attr-defined]
        assert jvm is not None
        self._path_cls = jvm.org.apache.hadoop.fs.Path
        self._fs = self._path_cls(any_path).getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]

    def _p(self, path: str) -> Any:
        return self._path_cls(path)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def delete(self, path: str) -> None:
        self._fs.delete(self._p(path), True)

    def rename(self, src: str, dst: str) -> None:
        self.mkdirs(dst.rsplit("/", 1)[0])
        if not self._fs.rename(self._p(src), self._p(dst)):
            raise DagspecError(f"could not rename {src} to {dst}")

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._p(path))

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._p(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._p(path))
        try:
            return bytes(stream.readAllBytes()).decode("utf-8")
        finally:
            stream.close()

    def list_names(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return [str(s.getPath().getName()) for s in self._fs.listStatus(self._p(path))]


@dataclass
class StageContext:
    """What a stage function may use besides its inputs and params."""

    spark: SparkSession
    stage: ResolvedStage
    work_dir: str
    metrics: dict[str, Any] = field(default_factory=dict)

    def output_path(self, name: str) -> str:
        """Where output ``name`` is written during this attempt (inside the temporary dir)."""
        return f"{self.work_dir}/{name}"

    def local_output_dir(self, name: str) -> Path:
        """A local directory for a files output (models, plots); created on first use."""
        path = self.output_path(name)
        if is_uri(path) and not path.startswith("file://"):
            raise DagspecError(f"files outputs need a local or file:// storage root, got {path}")
        local = Path(path.removeprefix("file://"))
        local.mkdir(parents=True, exist_ok=True)
        return local

    def scratch_dir(self, name: str) -> Path:
        """A local directory that survives a failed attempt of this fingerprint (for resuming)."""
        path = Path(self.stage.stage_dir.removeprefix("file://")) / f"_scratch-{self.stage.fingerprint}" / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def create_spark_session(app_name: str) -> SparkSession:
    """The job's session; master, conf and resources come from spark-submit."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.appName(app_name).getOrCreate()


def read_inputs(spark: SparkSession, stage: ResolvedStage) -> dict[str, DataFrame | str]:
    """Tables as DataFrames over the committed Parquet; files inputs as their directory path."""
    inputs: dict[str, DataFrame | str] = {}
    for role, source in stage.inputs.items():
        if source.type == IOType.TABLE.value:
            inputs[role] = spark.read.parquet(source.path)
        else:
            inputs[role] = source.path
    return inputs


def _schema_of(spark: SparkSession, path: str) -> tuple[int, str]:
    df = spark.read.parquet(path)
    return df.count(), df.schema.simpleString()


def run_stage(spark: SparkSession, stage: ResolvedStage) -> dict[str, Any]:
    """Run one stage and commit its checkpoint; returns the manifest."""
    kind = get_kind(stage.kind)
    if kind is None:
        raise DagspecError(f"unknown kind {stage.kind!r}")
    params: StageParams = kind.params.model_validate(stage.params)
    fs = HadoopFS(spark, stage.stage_dir)
    for name in fs.list_names(stage.stage_dir):  # leftovers of killed attempts of this fingerprint
        if name.startswith(f"_tmp-{stage.fingerprint}-") or name.startswith(f"_old-{stage.fingerprint}-"):
            fs.delete(f"{stage.stage_dir}/{name}")
    work_dir = f"{stage.stage_dir}/_tmp-{stage.fingerprint}-{uuid.uuid4().hex[:8]}"
    fs.mkdirs(work_dir)
    context = StageContext(spark=spark, stage=stage, work_dir=work_dir)
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    cpu0 = _cpu_seconds()
    function = kind.load_function()
    outputs: Mapping[str, DataFrame] = function(read_inputs(spark, stage), params, context) or {}
    manifest_outputs: dict[str, Any] = {}
    for name, df in outputs.items():
        if name not in stage.outputs:
            raise DagspecError(f"kind {kind.name!r} returned an undeclared output {name!r}")
        df.write.mode("errorifexists").parquet(context.output_path(name))
    for name, type_ in stage.outputs.items():
        path = context.output_path(name)
        if not fs.exists(path):
            raise DagspecError(f"stage {stage.name!r} did not write its output {name!r}")
        if type_ == IOType.TABLE.value:
            rows, schema = _schema_of(spark, path)
            manifest_outputs[name] = {"type": type_, "rows": rows, "schema": schema}
        else:
            manifest_outputs[name] = {"type": type_}
    duration = time.perf_counter() - t0
    manifest = {
        "dag_id": stage.dag_id,
        "stage": stage.name,
        "fingerprint": stage.fingerprint,
        "kind": stage.kind,
        "kind_version": stage.kind_version,
        "params": stage.params,
        "inputs": {
            role: {"stage": i.stage, "output": i.output, "fingerprint": i.fingerprint, "path": i.path}
            for role, i in stage.inputs.items()
        },
        "outputs": manifest_outputs,
        "rows": {name: o["rows"] for name, o in manifest_outputs.items() if "rows" in o},
        "started": started.isoformat(),
        "finished": datetime.now(UTC).isoformat(),
        "duration_s": round(duration, 3),
        "driver_cpu_s": round(_cpu_seconds() - cpu0, 3),
        "driver_peak_rss_mb": round(_peak_rss_mb(), 1),
        "spark": {
            "master": spark.sparkContext.master,
            "version": spark.version,
            "app_id": spark.sparkContext.applicationId,
        },
        "metrics": context.metrics,
    }
    fs.write_text(f"{work_dir}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True, default=str))
    commit(fs, stage, work_dir)
    return manifest


def commit(fs: HadoopFS, stage: ResolvedStage, work_dir: str) -> None:
    """Move a finished attempt into place, then mark it trusted with ``_SUCCESS``."""
    final = stage.checkpoint_dir
    if fs.exists(final):  # a forced rerun or a stale, untrusted attempt
        old = f"{stage.stage_dir}/_old-{stage.fingerprint}-{uuid.uuid4().hex[:8]}"
        fs.rename(final, old)
        fs.delete(old)
    fs.rename(work_dir, final)
    fs.write_text(f"{final}/{SUCCESS_MARKER}", "")
    scratch = f"{stage.stage_dir}/_scratch-{stage.fingerprint}"
    if fs.exists(scratch):
        fs.delete(scratch)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    """Entry point of ``jobs/run_stage.py``: ``[--force] STAGE_JSON`` (a ResolvedStage)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    if len(args) != 1:
        print("usage: run_stage.py [--force] STAGE_JSON", file=sys.stderr)
        return 2
    stage = ResolvedStage.from_json(args[0])
    os.environ.setdefault("DAGSPEC_HOME", stage.home)
    spark = create_spark_session(f"dagspec.{stage.dag_id}.{stage.name}")
    try:
        if not force and HadoopFS(spark, stage.stage_dir).exists(stage.success_path):
            log.info("checkpoint hit: %s", stage.checkpoint_dir)
            return 0
        manifest = run_stage(spark, stage)
        log.info("committed %s (%s rows) in %.1f s", stage.checkpoint_dir, manifest["rows"], manifest["duration_s"])
        return 0
    except DagspecError as exc:
        log.error("stage %s failed: %s", stage.name, exc)
        return 1
    finally:
        spark.stop()
