"""Keras training: a plain single-process fit vs ``train_keras`` with 1 and 2 workers.

Same data (synthetic ``HLF_input`` / ``encoded_label`` rows in Parquet, class-dependent), same
model (``hlf_dense``), same global batch, same epochs, in one run, interleaved round by round:

- ``keras fit``: pyarrow reads the whole Parquet table into numpy, ``model.fit`` (the baseline a
  notebook would write; it holds the whole dataset in memory), with Keras' default of one step
  per call and with ``steps_per_execution`` like train_keras;
- ``train_keras workers=1``: the stage through the real runtime and commit protocol, streaming
  batches from Parquet into the custom loop in this process;
- ``train_keras workers=2``: two Spark barrier tasks on local[2], MultiWorkerMirroredStrategy,
  each streaming its own shard (per-worker batch = global batch / 2).

Reported per variant: wall time (median of ``--repeat`` runs), the steady-state epoch time
(epochs 2..n: no tracing, no process start), and the final training loss.

Usage: ``.venv/bin/python bench/train_keras.py [--rows 50000] [--epochs 5] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def make_data(spark: Any, rows: int, path: Path, files: int) -> None:
    """Class-dependent HLF-like rows (no Python UDF), written as ``files`` Parquet parts."""
    from pyspark.sql import functions as F

    noise = "cast((pmod(hash(id, k), 2000) - 1000) / 1000.0 as double)"
    df = (
        spark.range(rows)
        .withColumn("label", (F.col("id") % 3).cast("int"))
        .withColumn("HLF_input", F.expr(f"transform(sequence(0, 13), k -> {noise} + label * 0.3)"))
        .withColumn("encoded_label", F.expr("transform(sequence(0, 2), k -> if(k = label, 1.0, 0.0))"))
    )
    df.repartition(files).write.mode("overwrite").parquet(str(path))


def plain_fit(data: Path, epochs: int, batch: int, lr: float, seed: int, spe: int = 1) -> dict[str, Any]:
    """The notebook way: read everything, compile, fit."""
    import keras
    import pyarrow.parquet as pq

    from dagspec.kinds.training.keras_inputs import InputSpec, encode_dense, encode_labels
    from dagspec.kinds.training.keras_models import build_model

    t0 = time.perf_counter()
    table = pq.read_table(data, columns=["HLF_input", "encoded_label"])
    spec = InputSpec("HLF_input", "dense", (14,))
    x = encode_dense(table.column("HLF_input").combine_chunks(), spec)
    y = encode_labels(table, "encoded_label", "multiclass", 3)
    keras.utils.set_random_seed(seed)
    model = build_model("hlf_dense", [spec], 3)
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="categorical_crossentropy", steps_per_execution=spe)
    epoch_times: list[float] = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.t = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            epoch_times.append(time.perf_counter() - self.t)

    hist = model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=True, verbose=0, callbacks=[Timer()])
    return {"wall_s": time.perf_counter() - t0, "loss": hist.history["loss"][-1], "epoch_times": epoch_times}


def stage_fit(spark: Any, data: Path, root: Path, epochs: int, batch: int, lr: float, seed: int, **params: Any) -> dict:
    """train_keras through resolve_pipeline + run_stage (the job's own code path)."""
    from dagspec.job.runtime import run_stage
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec
    from tests.helpers import write_spec

    extra = "".join(f", {k}: {v}" for k, v in params.items())
    spec_path = write_spec(
        root / "pipelines",
        f"""
        stages:
          data: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          model:
            kind: train_keras
            inputs: {{train: data}}
            params: {{architecture: hlf_dense, epochs: {epochs}, batch_size: {batch}, learning_rate: {lr},
                      seed: {seed}{extra}}}
        """,
        name=f"bench_{abs(hash(extra))}.yaml",
    )
    spec = load_spec(spec_path)
    plan = resolve_pipeline(spec, default_context(spec), storage_root=str(root / "storage"))
    run_stage(spark, plan["data"])
    plan = resolve_pipeline(spec, default_context(spec), storage_root=str(root / "storage"))  # keyed on data's content
    t0 = time.perf_counter()
    manifest = run_stage(spark, plan["model"]).manifest
    wall = time.perf_counter() - t0
    metrics = manifest["metrics"]
    return {"wall_s": wall, "loss": metrics["final_loss"], "epoch_times": metrics["history"]["epoch_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128, help="global batch size")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps-per-execution", type=int, default=32)
    parser.add_argument("--sweep-spe", action="store_true", help="also workers=2 with steps_per_execution=1")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-train-keras")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import tensorflow  # noqa: F401  (imported once, outside every timing)

    root = Path(tempfile.mkdtemp(prefix="bench-train-keras-"))
    data = root / "hlf"
    make_data(spark, args.rows, data, files=4)
    spe = args.steps_per_execution
    variants: dict[str, Any] = {
        "keras fit (1 process)": lambda: plain_fit(data, args.epochs, args.batch, args.lr, 7),
        f"keras fit (1 process), steps_per_execution={spe}": lambda: plain_fit(
            data, args.epochs, args.batch, args.lr, 7, spe
        ),
        "train_keras workers=1": lambda: stage_fit(
            spark, data, root, args.epochs, args.batch, args.lr, 7, workers=1, steps_per_execution=spe
        ),
        "train_keras workers=2": lambda: stage_fit(
            spark, data, root, args.epochs, args.batch // 2, args.lr, 7, workers=2, steps_per_execution=spe
        ),
    }
    if args.sweep_spe:
        variants["train_keras workers=2, steps_per_execution=1"] = lambda: stage_fit(
            spark, data, root, args.epochs, args.batch // 2, args.lr, 7, workers=2, steps_per_execution=1
        )
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for round_ in range(args.repeat):
        for name, run in variants.items():  # interleaved: background load hits every variant alike
            result = run()
            results[name].append(result)
            steady = statistics.median(result["epoch_times"][1:] or result["epoch_times"])
            print(
                f"round {round_ + 1} {name}: {result['wall_s']:.1f} s, steady epoch {steady:.2f} s, "
                f"loss {result['loss']:.4f}",
                flush=True,
            )
    load = os.getloadavg()
    print(
        f"\n{args.rows} rows, {args.epochs} epochs, global batch {args.batch}, n = {args.repeat}, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores"
    )
    print("| variant | wall s (median) | steady epoch s (median) | final loss (median) |")
    print("|---|---:|---:|---:|")
    summary = {}
    for name, runs in results.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        steady = statistics.median(t for r in runs for t in r["epoch_times"][1:] or r["epoch_times"])
        loss = statistics.median(r["loss"] for r in runs)
        summary[name] = {"wall_s": wall, "steady_epoch_s": steady, "loss": loss, "runs": runs}
        print(f"| {name} | {wall:.1f} | {steady:.2f} | {loss:.4f} |")
    (root / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"\nraw results: {root / 'results.json'}")
    spark.stop()


if __name__ == "__main__":
    main()
