"""Kind ``train_xgboost``: single node from the Parquet shards, or ``xgboost.spark`` over N tasks.

Both modes checkpoint the booster every ``checkpoint_every`` rounds into the stage's scratch
directory (which survives a killed attempt of the same fingerprint) and, when a checkpoint is
there, continue from it (``xgb_model``) for the remaining rounds only.

Missing values: hashed features are sparse vectors whose absent entries are missing (XGBoost's
``missing=0``, the only value ``xgboost.spark``'s sparse path accepts, so both modes and inference
agree); as_is columns use NaN for nulls, so a real 0 stays a value.

The single-node data feeding (Arrow batches, QuantileDMatrix) is in ``xgboost_data``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, Outputs, StageContext, kind
from dagspec.kinds.model_card import Features, ModelCard, training_data
from dagspec.kinds.training.trainer import MODEL_OUTPUT, TRAINER_INPUTS, by_workers
from dagspec.kinds.training.xgboost_params import TrainXGBoostParams

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("dagspec.stage")
CHECKPOINT = "booster.ubj"
ARTIFACT = "booster.json"
SPARK_MODEL = "spark_model"


@kind(
    "train_xgboost",
    params=TrainXGBoostParams,
    inputs=TRAINER_INPUTS,
    outputs=MODEL_OUTPUT,
    driver=by_workers("trains with SparkXGB (workers >= 2), which has no Spark Connect support in xgboost 3.2"),
    driver_reason="trains in its process (workers: 1), or with SparkXGB (workers >= 2), which has no Spark "
    "Connect support in xgboost 3.2",
)
def train_xgboost(inputs: Inputs, params: TrainXGBoostParams, ctx: StageContext) -> Outputs:
    """XGBoost (single node from Parquet shards, or on Spark) with checkpoint and resume.

    Trains, checkpointing as it goes; writes ``model/booster.json`` (+ ``spark_model/``) and model.json.
    """
    from dagspec.kinds.quality.labels import require_labels
    from dagspec.kinds.training.resources import ResourceMonitor

    train, validation = inputs.table("train"), inputs.optional_table("validation")
    features = feature_layout(train, params.label_col, params.features_col)
    for role, table in (("train", train), ("validation", validation)):
        if table is not None:
            require_labels(table, params.label_col, [0, 1], who="train_xgboost", role=role)
    scratch = ctx.scratch_dir("xgboost")
    init, start_round = load_checkpoint(scratch / CHECKPOINT)
    if start_round:
        log.info("resuming XGBoost from the checkpoint at round %d of %d", start_round, params.num_round)
    out = ctx.local_output_dir("model")
    with ResourceMonitor() as monitor:
        if params.workers == 1:
            booster, history = _train_single_node(ctx, params, features, init, start_round, scratch)
        else:
            booster, history = _train_spark(
                ctx.spark, train, validation, params, features, init, start_round, scratch, out
            )
    booster.save_model(str(out / ARTIFACT))
    resources = monitor.summary()
    final = {"final_logloss": {name: values[-1] for name, values in history.items()}} if history else {}
    card = ModelCard(
        flavor="xgboost",
        kind="train_xgboost",
        artifact=ARTIFACT,
        **features.model_dump(),
        label_col=params.label_col,
        input_shapes={features.features_col or "columns": [features.num_features]},
        classes=[0, 1],
        task="binary",
        params={**params.booster_params(), "num_round": params.num_round, "workers": params.workers},
        trained_on=training_data(ctx),
        metrics=final,
        mode="single_node" if params.workers == 1 else "spark",
        spark_model=SPARK_MODEL if params.workers > 1 else None,
        rounds=booster.num_boosted_rounds(),
        resumed_from_round=start_round,
        **resources,
    )
    card.write(out)
    ctx.metrics.update(
        {
            "resumed_from_round": start_round,
            "rounds": booster.num_boosted_rounds(),
            "checkpoint_every": params.checkpoint_every,
            "mode": "single_node" if params.workers == 1 else "spark",
            **{k: v for k, v in resources.items() if k != "resource_scope"},
        }
    )
    ctx.metrics.update(final)
    return {}


def feature_layout(df: DataFrame, label_col: str, features_col: str | None) -> Features:
    """Vector column (hashed) or numeric columns (as_is); the default is what ctr_features writes."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F

    if label_col not in df.columns:
        raise StageFailedError(f"no label column {label_col!r} in the training data (columns: {df.columns})")
    vector_cols = [f.name for f in df.schema.fields if isinstance(f.dataType, VectorUDT)]
    if features_col is None and vector_cols:
        features_col = vector_cols[0]
    if features_col is not None:
        if features_col not in vector_cols:
            raise StageFailedError(f"features_col {features_col!r} is not a vector column (vectors: {vector_cols})")
        first = df.select(
            F.unwrap_udt(features_col)["size"].alias("n"), F.size(F.unwrap_udt(features_col)["values"]).alias("v")
        ).first()
        if first is None:
            raise StageFailedError("the training data is empty")
        size = first["n"] if first["n"] is not None else first["v"]
        return Features(features_col=features_col, input_columns=[features_col], num_features=int(size), missing=0.0)
    columns = [f.name for f in df.schema.fields if f.name != label_col and f.dataType.typeName() in _NUMERIC]
    others = [f.name for f in df.schema.fields if f.name != label_col and f.name not in columns]
    if others:
        raise StageFailedError(f"as_is training needs numeric columns only; not numeric: {others}")
    if not columns:
        raise StageFailedError(f"as_is training needs numeric columns besides the label {label_col!r}: there are none")
    return Features(input_columns=columns, num_features=len(columns), missing=float("nan"))


_NUMERIC = {"byte", "short", "integer", "long", "float", "double", "decimal"}


def load_checkpoint(path: Path) -> tuple[Any, int]:
    """The booster saved by a killed attempt, and its number of rounds (None, 0 without one)."""
    if not path.exists():
        return None, 0
    import xgboost as xgb

    booster = xgb.Booster(model_file=str(path))
    return booster, booster.num_boosted_rounds()


def checkpoint_callback(path: Path, every: int) -> Any:
    """An XGBoost callback saving the booster every ``every`` rounds, atomically (tmp + rename).

    Under xgboost.spark every worker runs it; only rank 0 writes. The round count comes from the
    booster itself, so it stays right when training continues from a checkpoint.
    """
    import xgboost as xgb

    class SaveEvery(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            rounds = model.num_boosted_rounds()
            if rounds % every == 0 and xgb.collective.get_rank() == 0:
                tmp = path.with_suffix(f".tmp-{os.getpid()}.ubj")
                model.save_model(str(tmp))
                os.replace(tmp, path)
            return False

    return SaveEvery()


def progress_callback(num_round: int) -> Any:
    """A callback reporting each round and its eval metrics (``dagspec.kinds.progress``); it only reads."""
    import xgboost as xgb

    from dagspec.kinds.progress import report_training

    class ReportRounds(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            latest = {f"{data}-{name}": float(v[-1]) for data, log in evals_log.items() for name, v in log.items()}
            report_training("round", model.num_boosted_rounds(), num_round, latest)
            return False

    return ReportRounds()


def _train_single_node(
    ctx: StageContext,
    params: TrainXGBoostParams,
    features: Features,
    init: Any,
    start_round: int,
    scratch: Path,
) -> tuple[Any, dict[str, list[float]]]:
    import xgboost as xgb

    from dagspec.kinds.training.xgboost_data import parquet_files, quantile_matrix

    train_paths, val_paths = ctx.input_paths("train"), ctx.input_paths("validation")
    if not train_paths:  # a required role: the spec cannot leave it out
        raise StageFailedError("train_xgboost: the train input is not wired")
    train_files = [file for path in train_paths for file in parquet_files(path)]  # a window: every partition's
    with external_pages(scratch) as pages:
        dtrain, ctx.metrics["train_data"] = quantile_matrix(train_files, features, params, cache_dir=pages)
        if pages.exists():
            ctx.metrics["external_memory_mb"] = round(
                sum(f.stat().st_size for f in pages.rglob("*") if f.is_file()) / 2**20, 1
            )
        evals = [(dtrain, "train")]
        if val_paths:
            val_files = [file for path in val_paths for file in parquet_files(path)]
            dval, _ = quantile_matrix(val_files, features, params, ref=dtrain)
            evals.append((dval, "validation"))
        booster_params = {**params.booster_params(), "nthread": params.nthread or os.cpu_count() or 1}
        history: dict[str, dict[str, list[float]]] = {}
        remaining = params.num_round - start_round
        if remaining <= 0:
            return init, {}
        booster = xgb.train(
            booster_params,
            dtrain,
            num_boost_round=remaining,
            evals=evals,
            evals_result=history,
            verbose_eval=False,
            xgb_model=init,
            callbacks=[
                checkpoint_callback(scratch / CHECKPOINT, params.checkpoint_every),
                progress_callback(params.num_round),
            ],
        )
        return booster, {name: [float(v) for v in h["logloss"]] for name, h in history.items()}


@contextmanager
def external_pages(scratch: Path) -> Iterator[Path]:
    """The folder for xgboost's external-memory pages, emptied before (a killed attempt's) and after."""
    pages = scratch / "external_memory"
    shutil.rmtree(pages, ignore_errors=True)
    try:
        yield pages
    finally:
        shutil.rmtree(pages, ignore_errors=True)


def task_slots(spark: SparkSession) -> int:
    """Tasks Spark can run at once: cores (local[N] or executors) over spark.task.cpus."""
    sc = spark.sparkContext
    task_cpus = int(sc.getConf().get("spark.task.cpus", "1"))
    return max(1, sc.defaultParallelism // task_cpus)


def _train_spark(
    spark: SparkSession,
    train: DataFrame,
    validation: DataFrame | None,
    params: TrainXGBoostParams,
    features: Features,
    init: Any,
    start_round: int,
    scratch: Path,
    out: Path,
) -> tuple[Any, dict[str, list[float]]]:
    from pyspark.sql import functions as F
    from xgboost.spark import SparkXGBClassifier

    slots = task_slots(spark)
    if params.workers > slots:
        # xgboost.spark runs its workers as one barrier stage: with fewer slots it only logs a
        # warning and waits for ever
        raise StageFailedError(
            f"workers: {params.workers} needs {params.workers} concurrent Spark task slots but the session has "
            f"{slots} (master {spark.sparkContext.master}); lower workers or give the job more executor cores"
        )
    remaining = params.num_round - start_round
    if remaining <= 0:
        return init, {}
    vector = features.features_col is not None
    data = train
    extra: dict[str, Any] = {}
    if validation is not None:
        data = train.withColumn("_is_validation", F.lit(False)).unionByName(
            validation.withColumn("_is_validation", F.lit(True))
        )
        extra["validation_indicator_col"] = "_is_validation"
    classifier = SparkXGBClassifier(
        features_col=features.features_col or features.input_columns,
        label_col=params.label_col,
        num_workers=params.workers,
        n_estimators=remaining,
        booster=params.booster,
        max_depth=params.max_depth,
        learning_rate=params.eta,
        gamma=params.gamma,
        subsample=params.subsample,
        colsample_bytree=params.colsample_bytree,
        min_child_weight=params.min_child_weight,
        reg_alpha=params.alpha,
        reg_lambda=params.lambda_,
        tree_method=params.tree_method,
        max_bin=params.max_bin,
        random_state=params.seed,
        missing=features.missing,
        enable_sparse_data_optim=vector,
        xgb_model=init,
        callbacks=[checkpoint_callback(scratch / CHECKPOINT, params.checkpoint_every)],
        # xgboost.spark only repartitions when the partition count differs from num_workers, but
        # a file of one row group split by bytes gives N partitions of which all but one are
        # empty: measured on a 100k-row checkpoint, one worker trained on everything
        force_repartition=True,
        **extra,
    )
    model = classifier.fit(data)
    model.write().overwrite().save(str(out / SPARK_MODEL))
    return model.get_booster(), {}
