"""The training loop of ``train_keras``: one process, or one worker of a MultiWorkerMirroredStrategy.

Why a custom loop and not ``model.fit``: Keras 3's ``fit`` fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585), so the same ``tf.function`` loop (``strategy.run`` + the Keras
optimizer's ``apply_gradients``, which all-reduces the gradients) serves ``workers: 1`` (default
strategy) and ``workers: N`` (one replica per Spark barrier task). See docs/training.md.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dagspec.kinds.progress import report_training
from dagspec.kinds.training.keras_inputs import (
    InputSpec,
    Piece,
    encode_features,
    encode_labels,
    eval_tables,
    train_tables,
)

log = logging.getLogger("dagspec.stage")

CHECKPOINT_PREFIX = "epoch-"
HISTORY_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy", "epoch_time_s")
PREFETCH_BATCHES = 4  # batches the input thread prepares ahead of the training step


@dataclass
class TrainJob:
    """Everything a worker needs, JSON-serializable (it crosses into Spark tasks and subprocesses)."""

    architecture: str
    specs: list[dict[str, Any]]
    label_col: str
    task: str
    num_classes: int
    epochs: int
    batch_size: int
    workers: int
    learning_rate: float
    seed: int
    steps_per_execution: int
    embedding_dim: int
    shuffle: bool
    steps_per_epoch: int
    val_steps: int
    train_shards: list[list[dict[str, Any]]]
    val_shards: list[list[dict[str, Any]]] = field(default_factory=list)
    checkpoint_dir: str | None = None
    threads: int | None = None  # intra-op threads per worker (None: TensorFlow's default)

    def to_json(self) -> str:
        """The job as one JSON string."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrainJob:
        """Inverse of to_json."""
        return cls(**json.loads(text))

    def input_specs(self) -> list[InputSpec]:
        """The feature specs."""
        return [InputSpec.from_json(s) for s in self.specs]

    def shard(self, rank: int, validation: bool = False) -> list[Piece]:
        """The pieces worker ``rank`` reads."""
        shards = self.val_shards if validation else self.train_shards
        return [Piece(**p) for p in shards[rank]] if shards else []

    @property
    def columns(self) -> list[str]:
        """The Parquet columns to read."""
        return [s["column"] for s in self.specs] + [self.label_col]


def latest_checkpoint(directory: Path) -> tuple[int, Path] | None:
    """(epochs completed, file) of the newest checkpoint in ``directory``, or None."""
    found = []
    for path in directory.glob(f"{CHECKPOINT_PREFIX}*.npz"):
        try:
            found.append((int(path.stem.removeprefix(CHECKPOINT_PREFIX)), path))
        except ValueError:  # a foreign file: not ours to interpret
            continue
    return max(found) if found else None


def checkpoint_history(path: Path) -> dict[str, list[float]]:
    """The loss/metric history stored in a checkpoint."""
    with np.load(path) as data:
        history: dict[str, list[float]] = json.loads(str(data["history"]))
    return history


def _save_checkpoint(
    directory: Path, epochs_done: int, model: Any, optimizer: Any, history: dict[str, list[float]]
) -> None:
    arrays: dict[str, Any] = {"history": np.array(json.dumps(history)), "epoch": np.array(epochs_done)}
    for i, w in enumerate(model.get_weights()):
        arrays[f"w{i}"] = w
    for i, v in enumerate(optimizer.variables):
        arrays[f"o{i}"] = np.asarray(v.value if hasattr(v, "value") else v)
    final = directory / f"{CHECKPOINT_PREFIX}{epochs_done:04d}.npz"
    tmp = directory / f".{final.name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)  # atomic: a killed attempt never leaves a half-written checkpoint
    for _, old in sorted((int(p.stem.removeprefix(CHECKPOINT_PREFIX)), p) for p in directory.glob("epoch-*.npz"))[:-2]:
        old.unlink(missing_ok=True)


def _restore_checkpoint(path: Path, model: Any, optimizer: Any) -> tuple[int, dict[str, list[float]]]:
    with np.load(path) as data:
        n_w = len([k for k in data.files if k.startswith("w")])
        n_o = len([k for k in data.files if k.startswith("o")])
        if n_w != len(model.get_weights()) or n_o != len(optimizer.variables):
            raise ValueError(f"checkpoint {path} does not match the model (weights {n_w}, optimizer {n_o})")
        model.set_weights([data[f"w{i}"] for i in range(n_w)])
        for i, v in enumerate(optimizer.variables):
            v.assign(data[f"o{i}"])
        return int(data["epoch"]), json.loads(str(data["history"]))


def _usage() -> tuple[float, float]:
    from dagspec.processes import own_peak_rss_mb

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, own_peak_rss_mb()


def run_training(job: TrainJob, rank: int, resume: Path | None, model_path: Path | None) -> dict[str, Any]:
    """Train (resuming from ``resume``), checkpoint per epoch (chief), save ``model_path`` (chief).

    Returns the history and resource figures of this worker.
    """
    t0 = time.perf_counter()
    cpu0, _ = _usage()
    import tensorflow as tf

    if job.threads:
        # must run before TensorFlow executes anything; N workers on one host would otherwise
        # each start a thread per core and fight over the same cores
        tf.config.threading.set_intra_op_parallelism_threads(job.threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, job.threads))
    import keras

    from dagspec.kinds.training.keras_models import build_model

    if job.workers > 1:
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
        strategy: Any = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    else:
        strategy = tf.distribute.get_strategy()
    keras.utils.set_random_seed(job.seed)
    specs = job.input_specs()
    with strategy.scope():
        model = build_model(job.architecture, specs, job.num_classes, job.embedding_dim)
        optimizer = keras.optimizers.Adam(learning_rate=job.learning_rate)
        optimizer.build(model.trainable_variables)
    start_epoch = 0
    history: dict[str, list[float]] = {k: [] for k in HISTORY_KEYS}
    if resume is not None:
        start_epoch, history = _restore_checkpoint(resume, model, optimizer)
        _say(rank, f"resumed from {resume.name}: {start_epoch} of {job.epochs} epochs done")

    binary = job.task == "binary"
    global_batch = job.batch_size * job.workers
    b = job.batch_size

    def _model_input(x: dict[str, Any]) -> Any:
        # a single-input model takes the tensor itself (a dict makes Keras warn on every trace)
        return next(iter(x.values())) if len(x) == 1 else x

    def per_example_loss(y: Any, p: Any) -> Any:
        if binary:
            return keras.losses.binary_crossentropy(y, p)
        return keras.losses.categorical_crossentropy(y, p)

    def totals(y: Any, p: Any, losses: Any, w: Any) -> Any:
        if binary:
            hit = tf.cast(tf.equal(tf.cast(p[:, 0] > 0.5, tf.float32), y[:, 0]), tf.float32)
        else:
            hit = tf.cast(tf.equal(tf.argmax(p, axis=1), tf.argmax(y, axis=1)), tf.float32)
        return tf.stack([tf.reduce_sum(losses * w), tf.reduce_sum(w), tf.reduce_sum(hit * w)])

    def train_step(x: Any, y: Any, w: Any) -> Any:
        with tf.GradientTape() as tape:
            p = model(_model_input(x), training=True)
            losses = per_example_loss(y, p)
            # divide by the global batch: the optimizer sums the workers' gradients
            loss = tf.reduce_sum(losses * w) / global_batch
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return totals(y, p, losses, w)

    def eval_step(x: Any, y: Any, w: Any) -> Any:
        p = model(_model_input(x), training=False)
        return totals(y, p, per_example_loss(y, p), w)

    def chunk_fn(step: Any) -> Any:
        @tf.function  # type: ignore[untyped-decorator]  # tensorflow has no type information
        def run_chunk(iterator: Any, n: Any) -> Any:
            # several steps per call: one Python round trip per `steps_per_execution` steps
            acc = tf.zeros([3])
            for _ in tf.range(n):
                per_replica = strategy.run(step, args=next(iterator))
                acc += tf.add_n(strategy.experimental_local_results(per_replica))
            return acc

        return run_chunk

    train_chunk, eval_chunk = chunk_fn(train_step), chunk_fn(eval_step)

    @tf.function  # type: ignore[untyped-decorator]
    def all_reduce_sum(value: Any) -> Any:
        per_replica = strategy.run(tf.identity, args=(value,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def global_sum(local: np.ndarray) -> np.ndarray:
        # one all-reduce per epoch for the metrics, not one per step
        return np.asarray(all_reduce_sum(tf.constant(local, dtype=tf.float32)))

    failure: list[BaseException] = []
    cols = job.columns

    def encode(table: Any, real: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        w = np.ones(b, dtype=np.float32)
        w[real:] = 0.0
        return encode_features(table, specs), encode_labels(table, job.label_col, job.task, job.num_classes), w

    def guarded(gen: Iterator[Any]) -> Iterator[Any]:
        # keep the original exception: tf.data would only pass on its message
        try:
            yield from gen
        except BaseException as exc:  # kept whatever it is, and re-raised: tf.data would pass on only its message
            failure.append(exc)
            raise

    def train_batches() -> Iterator[Any]:
        shard = job.shard(rank)
        for epoch in range(start_epoch, job.epochs):
            rng = np.random.default_rng([job.seed, rank, epoch]) if job.shuffle else None
            for table in train_tables(shard, cols, b, job.steps_per_epoch, rng):
                yield encode(table, b)

    def val_batches() -> Iterator[Any]:
        shard = job.shard(rank, validation=True)
        for _ in range(start_epoch, job.epochs):
            for table, real in eval_tables(shard, cols, b, job.val_steps):
                yield encode(table, real)

    label_width = 1 if binary else job.num_classes
    x_sig: dict[str, Any] = {}
    for spec in specs:
        if spec.encoding == "sparse":
            x_sig[f"{spec.column}_indices"] = tf.TensorSpec((b, None), tf.int32)
            x_sig[f"{spec.column}_values"] = tf.TensorSpec((b, None), tf.float32)
        else:
            x_sig[spec.column] = tf.TensorSpec((b, *spec.shape), tf.float32)
    signature = (x_sig, tf.TensorSpec((b, label_width), tf.float32), tf.TensorSpec((b,), tf.float32))

    def distributed(gen_fn: Any) -> Any:
        ds = tf.data.Dataset.from_generator(lambda: guarded(gen_fn()), output_signature=signature)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        # no autotuning: its model thread held the freeing of a finished iterator for 13-20 s after
        # the last epoch (seen in the iterator's destructor); one generator gains nothing from it
        options.autotune.enabled = False
        ds = ds.with_options(options).prefetch(PREFETCH_BATCHES)
        return iter(strategy.distribute_datasets_from_function(lambda _ctx: ds))

    checkpoint_dir = Path(job.checkpoint_dir) if job.checkpoint_dir else None
    try:
        train_it = distributed(train_batches) if start_epoch < job.epochs else None
        val_it = distributed(val_batches) if job.val_steps and start_epoch < job.epochs else None
        for epoch in range(start_epoch, job.epochs):
            te = time.perf_counter()
            acc = _run_chunks(train_chunk, train_it, job.steps_per_epoch, job.steps_per_execution, tf)
            loss_sum, weight, hits = global_sum(acc)
            history["loss"].append(float(loss_sum / weight))
            history["accuracy"].append(float(hits / weight))
            if val_it is not None:
                acc = _run_chunks(eval_chunk, val_it, job.val_steps, job.steps_per_execution, tf)
                loss_sum, weight, hits = global_sum(acc)
                history["val_loss"].append(float(loss_sum / weight))
                history["val_accuracy"].append(float(hits / weight))
            history["epoch_time_s"].append(round(time.perf_counter() - te, 3))
            if checkpoint_dir is not None and rank == 0:
                _save_checkpoint(checkpoint_dir, epoch + 1, model, optimizer, history)
            if rank == 0:  # the stage's progress (in the stage's own process only: workers: 1)
                report_training(
                    "epoch", epoch + 1, job.epochs, {k: v[-1] for k, v in history.items() if v and k != "epoch_time_s"}
                )
            _say(
                rank, f"epoch {epoch + 1}/{job.epochs} " + " ".join(f"{k}={v[-1]:.4f}" for k, v in history.items() if v)
            )
    except Exception as exc:  # re-raised, never kept: an input thread's own failure (``failure``) goes first
        if failure:
            raise failure[0] from exc
        raise
    if model_path is not None:
        model.save(model_path)
    cpu1, peak = _usage()
    return {
        "rank": rank,
        "history": {k: v for k, v in history.items() if v},
        "resumed_epoch": start_epoch,
        "train_time_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(cpu1 - cpu0, 3),
        "peak_rss_mb": round(peak, 1),
    }


def _run_chunks(chunk: Any, iterator: Any, steps: int, per_call: int, tf: Any) -> np.ndarray:
    acc = np.zeros(3, dtype=np.float64)
    for done in range(0, steps, per_call):
        acc += np.asarray(chunk(iterator, tf.constant(min(per_call, steps - done))), dtype=np.float64)
    return acc


def _say(rank: int, message: str) -> None:
    log.info("train_keras worker %d: %s", rank, message)
