"""Kind ``train_keras``: a Keras classifier from Parquet batches, on the driver or N barrier tasks.

The driver plans (Parquet metadata only: pieces, shards, steps), resumes from the newest
checkpoint of this fingerprint, runs the loop of ``keras_loop`` (in this process for
``workers: 1``, in N Spark barrier tasks otherwise), then writes ``model/model.keras`` and
``model/model.json``. No data passes through the Spark driver.

The params model is pydantic only; TensorFlow, pyarrow and Spark are imported inside the functions.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.class_names import label_class_names
from dagspec.kinds.model_card import ModelCard, training_data
from dagspec.kinds.training.trainer import MODEL_OUTPUT, TRAINER_INPUTS, by_workers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagspec.kinds.training.keras_loop import TrainJob

log = logging.getLogger("dagspec.stage")

Architecture = Literal["hlf_dense", "particle_gru", "inclusive", "logistic", "wide_deep"]

# The columns ``topology_features`` writes (physics) and the CTR pipelines' hashed vector.
DEFAULT_FEATURES: dict[str, str] = {
    "hlf_dense": "HLF_input",
    "particle_gru": "GRU_input",
    "inclusive": "GRU_input",
    "logistic": "features",
    "wide_deep": "features",
}
DEFAULT_LABELS: dict[str, str] = {
    "hlf_dense": "encoded_label",
    "particle_gru": "encoded_label",
    "inclusive": "encoded_label",
    "logistic": "label",
    "wide_deep": "label",
}
BINARY_ARCHITECTURES = ("logistic", "wide_deep")

MODEL_FILE = "model.keras"
ENCODING_BY_ARCHITECTURE = {
    "hlf_dense": ["dense"],
    "particle_gru": ["sequence"],
    "inclusive": ["sequence", "dense"],
    "logistic": ["sparse"],
    "wide_deep": ["sparse"],
}


class TrainKerasParams(StageParams):
    """A Keras classifier trained by a custom loop, on one process or N Spark barrier tasks.

    ``batch_size`` is per worker: the global batch is ``batch_size * workers``.
    """

    architecture: Architecture
    features_col: str | None = Field(
        default=None,
        min_length=1,
        description="feature column (inclusive: the particle sequence); default per architecture",
    )
    hlf_col: str | None = Field(default=None, min_length=1, description="inclusive only: the 14 HLF (HLF_input)")
    label_col: str | None = Field(
        default=None, min_length=1, description="one-hot array or integer class; default per architecture"
    )
    num_classes: int = Field(default=3, ge=2, description="multiclass architectures: number of classes")
    epochs: int = Field(default=5, ge=1, le=100_000)
    batch_size: int = Field(default=128, ge=1, le=1_000_000, description="per worker")
    learning_rate: float = Field(default=1e-3, gt=0, le=10)
    seed: int = 42
    workers: int = Field(default=1, ge=1, le=1024, description=">= 2: synchronous data-parallel Spark barrier tasks")
    steps_per_execution: int = Field(
        default=32, ge=1, le=100_000, description="training steps per compiled call (fewer Python round trips)"
    )
    max_particles: int | None = Field(
        default=None, ge=1, description="pad/truncate sequences to this length (default: longest in the batch)"
    )
    embedding_dim: int = Field(default=8, ge=1, le=1024, description="wide_deep: width of the deep embedding")
    shuffle: bool = Field(default=True, description="shuffle row-group order and rows within a row group per epoch")

    @model_validator(mode="after")
    def _hlf_only_for_inclusive(self) -> TrainKerasParams:
        if self.hlf_col is not None and self.architecture != "inclusive":
            raise ValueError(f"hlf_col applies to architecture 'inclusive' only, not {self.architecture!r}")
        return self

    @property
    def features(self) -> str:
        """The feature column (the sequence column for ``inclusive``)."""
        return self.features_col or DEFAULT_FEATURES[self.architecture]

    @property
    def label(self) -> str:
        """The label column."""
        return self.label_col or DEFAULT_LABELS[self.architecture]

    @property
    def hlf(self) -> str | None:
        """``inclusive``: the HLF column; otherwise None."""
        if self.architecture != "inclusive":
            return None
        return self.hlf_col or "HLF_input"

    @property
    def input_columns(self) -> list[str]:
        """Every feature column the model reads, in model-input order."""
        return [self.features] + ([self.hlf] if self.hlf else [])

    @property
    def task(self) -> Literal["binary", "multiclass"]:
        """binary (sigmoid, binary cross-entropy) or multiclass (softmax, categorical cross-entropy)."""
        return "binary" if self.architecture in BINARY_ARCHITECTURES else "multiclass"


@kind(
    "train_keras",
    params=TrainKerasParams,
    inputs=TRAINER_INPUTS,
    outputs=MODEL_OUTPUT,
    driver=by_workers("trains over Spark barrier tasks (workers >= 2), an RDD API"),
    driver_reason="trains in its process (workers: 1) or over Spark barrier tasks (workers >= 2, an RDD API)",
)
def train_keras(inputs: Inputs, params: TrainKerasParams, ctx: StageContext) -> Outputs:
    """Train a Keras classifier (hlf_dense, particle_gru, inclusive, logistic, wide_deep), streaming Parquet batches; workers >= 2 train data-parallel over Spark barrier tasks.

    Checkpoints every epoch into the stage's scratch area; writes the model files output.
    """
    from dagspec.kinds.training.keras_inputs import InputDataError, Piece, shard_rows
    from dagspec.kinds.training.keras_loop import latest_checkpoint, run_training

    train_path = ctx.input_path("train")
    if train_path is None:  # a required role: the spec cannot leave it out
        raise StageFailedError("train_keras: the train input is not wired")
    val_path = ctx.input_path("validation")
    check_slots(ctx.spark, params.workers)
    check_labels(inputs, params)
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
    classes = list(range(2 if params.task == "binary" else params.num_classes))
    names = label_class_names(inputs.table("train").schema[params.label].metadata)
    card = ModelCard(
        flavor="keras",
        kind="train_keras",
        artifact=MODEL_FILE,
        features_col=params.features,
        label_col=params.label,
        input_columns=params.input_columns,
        input_shapes={s["column"]: s["shape"] for s in job.specs},
        inputs=job.specs,
        classes=classes,
        class_names=names if names and len(names) == len(classes) else None,
        task=params.task,
        params=params.model_dump(mode="json"),
        trained_on=training_data(ctx),
        train_time_s=round(wall, 3),
        peak_memory_mb=max(r["peak_rss_mb"] for r in results),
        cpu_load=round(cpu_s / wall, 2) if wall > 0 else 0.0,
        metrics={f"final_{name}": v[-1] for name, v in history.items() if v and name != "epoch_time_s"},
        architecture=params.architecture,
        history=history,
        resumed_epoch=chief["resumed_epoch"],
        workers=params.workers,
        steps_per_epoch=job.steps_per_epoch,
        global_batch_size=params.batch_size * params.workers,
    )
    card.write(out)
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
            "train_time_s": card.train_time_s,
            "peak_memory_mb": card.peak_memory_mb,
            "cpu_load": card.cpu_load,
        }
    )
    return {}


def check_labels(inputs: Inputs, params: TrainKerasParams) -> None:
    """Every label of train and validation is a class (or a one-hot of num_classes): one aggregation each."""
    from dagspec.kinds.quality.labels import require_labels

    classes = list(range(2 if params.task == "binary" else params.num_classes))
    for role in ("train", "validation"):
        table = inputs.optional_table(role)
        if table is not None:
            require_labels(table, params.label, classes, who="train_keras", role=role, one_hot_size=params.num_classes)


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
    from dagspec.kinds.training.keras_inputs import (
        InputDataError,
        Piece,
        infer_input_spec,
        list_pieces,
        sample_table,
        shard_pieces,
        shard_rows,
        steps_for,
    )
    from dagspec.kinds.training.keras_loop import TrainJob

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
    if (sc.master or "").startswith("local"):
        # N workers share this host's cores: one intra-op pool each, sized to its share
        job.threads = max(1, sc.defaultParallelism // job.workers)
    else:
        job.threads = int(sc.getConf().get("spark.task.cpus", "1"))
    payload = job.to_json()

    def task(_index: int, _rows: Any) -> Any:
        from dagspec.kinds.training.keras_worker import run_barrier_task

        yield run_barrier_task(payload, resume)

    rdd = sc.parallelize(range(job.workers), job.workers).barrier().mapPartitionsWithIndex(task)
    sc.setJobDescription(f"train_keras {job.architecture} workers={job.workers}")
    try:
        results = [json.loads(r) for r in rdd.collect()]
    except Exception as exc:  # the task's error comes wrapped by Py4J/Spark as any class: report the worker's traceback
        detail = _worker_failure(str(exc))
        log.error("train_keras: distributed training failed:\n%s", detail)
        raise StageFailedError(f"train_keras: distributed training failed:\n{detail}") from exc
    return sorted(results, key=lambda r: r["rank"])


def _worker_failure(message: str) -> str:
    """The failing worker's part of a Spark error message (or its head when not found)."""
    from dagspec.kinds.training.keras_worker import FAILURE_MARKER

    start = message.find(FAILURE_MARKER)
    if start < 0:
        return message[:4000]
    text = message[start:]
    # cut Spark's own stack trace that follows the Python exception
    end = re.search(r"\n\s+at org\.apache\.spark|\n\tat ", text)
    return text[: end.start()] if end else text[:8000]
