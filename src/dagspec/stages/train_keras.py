"""Stage ``train_keras``: a Keras classifier from Parquet batches, on the driver or N barrier tasks.

The driver plans (Parquet metadata only: pieces, shards, steps), resumes from the newest
checkpoint of this fingerprint, runs the loop of ``train_keras_loop`` (in this process for
``workers: 1``, in N Spark barrier tasks otherwise), then writes ``model/model.keras`` and
``model/model.json``. No data passes through the Spark driver.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from dagspec.errors import StageFailedError
from dagspec.kinds.train import TrainKerasParams
from dagspec.runtime import StageContext
from dagspec.stages.keras_inputs import (
    InputDataError,
    InputSpec,
    Piece,
    infer_input_spec,
    list_pieces,
    sample_table,
    shard_pieces,
    shard_rows,
    steps_for,
)
from dagspec.stages.train_keras_loop import TrainJob, latest_checkpoint, run_training
from dagspec.stages.train_keras_worker import FAILURE_MARKER

log = logging.getLogger("dagspec.stage")

MODEL_FILE = "model.keras"
ENCODING_BY_ARCHITECTURE = {
    "hlf_dense": ["dense"],
    "particle_gru": ["sequence"],
    "inclusive": ["sequence", "dense"],
    "logistic": ["sparse"],
    "wide_deep": ["sparse"],
}


def train_keras(inputs: Mapping[str, DataFrame | str], params: TrainKerasParams, ctx: StageContext) -> dict:
    """Train, checkpointing every epoch into the stage's scratch area; write the model files output."""
    train_path = ctx.stage.inputs["train"].path
    val_path = ctx.stage.inputs["validation"].path if "validation" in ctx.stage.inputs else None
    check_slots(ctx.spark, params.workers)
    job = plan_job(params, train_path, val_path)
    checkpoints = ctx.scratch_dir("checkpoints")
    job.checkpoint_dir = str(checkpoints)
    latest = latest_checkpoint(checkpoints)
    resume = latest[1] if latest else None
    if latest:
        log.info("train_keras: resuming after epoch %d from %s", latest[0], latest[1])

    out = ctx.local_output_dir("model")
    t0 = time.perf_counter()
    try:
        if params.workers == 1:
            results = [run_training(job, 0, resume, out / MODEL_FILE)]
        else:
            results = run_distributed(ctx.spark, job, resume.read_bytes() if resume else None)
            (out / MODEL_FILE).write_bytes(base64.b64decode(results[0].pop("model_b64")))
    except InputDataError as exc:
        raise StageFailedError(f"train_keras: bad input data: {exc}") from exc
    wall = time.perf_counter() - t0
    chief = results[0]
    history = chief["history"]
    cpu_s = sum(r["cpu_s"] for r in results)
    meta = {
        "flavor": "keras",
        "artifact": MODEL_FILE,
        "architecture": params.architecture,
        "features_col": params.features,
        "label_col": params.label,
        "input_columns": params.input_columns,
        "input_shapes": {s["column"]: s["shape"] for s in job.specs},
        "inputs": job.specs,
        "classes": list(range(2 if params.task == "binary" else params.num_classes)),
        "task": params.task,
        "params": params.model_dump(mode="json"),
        "train_time_s": round(wall, 3),
        "peak_memory_mb": max(r["peak_rss_mb"] for r in results),
        "cpu_load": round(cpu_s / wall, 2) if wall > 0 else 0.0,
        "history": history,
        "resumed_epoch": chief["resumed_epoch"],
        "workers": params.workers,
        "steps_per_epoch": job.steps_per_epoch,
        "global_batch_size": params.batch_size * params.workers,
    }
    (out / "model.json").write_text(json.dumps(meta, indent=2))
    ctx.metrics.update(
        {
            "history": history,
            "resumed_epoch": chief["resumed_epoch"],
            "epochs": params.epochs,
            "workers": params.workers,
            "steps_per_epoch": job.steps_per_epoch,
            "global_batch_size": params.batch_size * params.workers,
            "train_rows": sum(shard_rows([Piece(**p) for p in s]) for s in job.train_shards),
            "final_loss": history["loss"][-1] if history.get("loss") else None,
            "train_time_s": meta["train_time_s"],
            "peak_memory_mb": meta["peak_memory_mb"],
            "cpu_load": meta["cpu_load"],
        }
    )
    return {}


def check_slots(spark: SparkSession, workers: int) -> None:
    """Fail now when a barrier stage of ``workers`` tasks could never be scheduled (Spark would wait)."""
    if workers == 1:
        return
    slots = spark.sparkContext.defaultParallelism
    if workers > slots:
        raise StageFailedError(
            f"train_keras: workers: {workers} needs {workers} concurrent task slots, but the Spark application "
            f"has {slots} (master {spark.sparkContext.master}); lower workers or give the job more executor cores"
        )


def plan_job(params: TrainKerasParams, train_path: str, val_path: str | None) -> TrainJob:
    """Pieces, shards, steps and input specs, from Parquet metadata and a few sample rows."""
    columns = [*params.input_columns, params.label]
    try:
        pieces = list_pieces(train_path)
        rows = sum(p.length for p in pieces)
        if rows < params.workers:
            raise StageFailedError(f"train_keras: {rows} training rows cannot feed {params.workers} workers")
        sample = sample_table(train_path, columns)
        specs = [
            infer_input_spec(sample, col, enc, params.max_particles)
            for col, enc in zip(params.input_columns, ENCODING_BY_ARCHITECTURE[params.architecture], strict=True)
        ]
    except InputDataError as exc:
        raise StageFailedError(f"train_keras: {exc}") from exc
    except KeyError as exc:  # pyarrow: a column the files do not have
        raise StageFailedError(f"train_keras: column {exc} not in {train_path}") from exc
    train_shards = shard_pieces(pieces, params.workers)
    steps = steps_for([shard_rows(s) for s in train_shards], params.batch_size)
    val_shards: list[list[Piece]] = []
    val_steps = 0
    if val_path is not None:
        val_pieces = list_pieces(val_path)
        if sum(p.length for p in val_pieces) < params.workers:
            raise StageFailedError(f"train_keras: the validation input has fewer rows than workers ({params.workers})")
        val_shards = shard_pieces(val_pieces, params.workers)
        val_steps = steps_for([shard_rows(s) for s in val_shards], params.batch_size)
    return TrainJob(
        architecture=params.architecture,
        specs=[s.to_json() for s in specs],
        label_col=params.label,
        task=params.task,
        num_classes=params.num_classes,
        epochs=params.epochs,
        batch_size=params.batch_size,
        workers=params.workers,
        learning_rate=params.learning_rate,
        seed=params.seed,
        steps_per_execution=params.steps_per_execution,
        embedding_dim=params.embedding_dim,
        shuffle=params.shuffle,
        steps_per_epoch=steps,
        val_steps=val_steps,
        train_shards=[[vars(p) for p in s] for s in train_shards],
        val_shards=[[vars(p) for p in s] for s in val_shards],
    )


def run_distributed(spark: SparkSession, job: TrainJob, resume: bytes | None) -> list[dict[str, Any]]:
    """Run the job over ``job.workers`` barrier tasks; results ordered by rank (chief first)."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        # N workers share this host's cores: one intra-op pool each, sized to its share
        job.threads = max(1, sc.defaultParallelism // job.workers)
    else:
        job.threads = int(sc.getConf().get("spark.task.cpus", "1"))
    payload = job.to_json()

    def task(_index: int, _rows: Any) -> Any:
        from dagspec.stages.train_keras_worker import run_barrier_task

        yield run_barrier_task(payload, resume)

    rdd = sc.parallelize(range(job.workers), job.workers).barrier().mapPartitionsWithIndex(task)
    sc.setJobDescription(f"train_keras {job.architecture} workers={job.workers}")
    try:
        results = [json.loads(r) for r in rdd.collect()]
    except Exception as exc:  # Py4J/Spark wrap the task's error: keep the worker's own traceback
        detail = _worker_failure(str(exc))
        log.error("train_keras: distributed training failed:\n%s", detail)
        raise StageFailedError(f"train_keras: distributed training failed:\n{detail}") from exc
    return sorted(results, key=lambda r: r["rank"])


def _worker_failure(message: str) -> str:
    """The failing worker's part of a Spark error message (or its head when not found)."""
    start = message.find(FAILURE_MARKER)
    if start < 0:
        return message[:4000]
    text = message[start:]
    # cut Spark's own stack trace that follows the Python exception
    end = re.search(r"\n\s+at org\.apache\.spark|\n\tat ", text)
    return text[: end.start()] if end else text[:8000]


def model_input_specs(model_json: Mapping[str, Any]) -> list[InputSpec]:
    """The input specs recorded in a model.json (for inference with ``keras_inputs.encode_features``)."""
    return [InputSpec.from_json(s) for s in model_json["inputs"]]
