"""The CTR kinds: Criteo logs (generate, read), features, XGBoost and Spark ML training, report."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from dagspec.registry import InputRole, IOType, KindDef, StageParams, register


class GenerateCriteoLogsParams(StageParams):
    """Synthetic click logs in the exact raw Criteo format, one file per day."""

    rows: int = Field(ge=0, description="total rows over all days (0 writes empty day files)")
    days: int = Field(default=1, ge=1, le=366)
    seed: int = 42
    base_ctr: float = Field(default=0.03, gt=0, lt=1, description="fraction of clicks (1 TiB data: ~3%)")
    partitions_per_day: int = Field(default=2, ge=1)
    compress: bool = Field(default=False, description="write day_NN.tsv.gz instead of day_NN.tsv")


register(
    KindDef(
        name="generate_criteo_logs",
        params=GenerateCriteoLogsParams,
        function="dagspec.stages.ctr_generate:generate_criteo_logs",
        version="1",
        description="Synthetic Criteo-format click logs (day_NN.tsv files) with a planted signal.",
        inputs={},
        outputs={"logs": IOType.FILES},
    )
)


class ReadCriteoParams(StageParams):
    """Raw Criteo logs read robustly (the same options as ``read`` with ``format: criteo``).

    ``path`` is a file, directory or glob; relative paths are relative to the ``logs`` input
    directory when that input is wired, else to the project directory. ``days`` selects among the
    matched files in sorted order: the benchmark trains on all days but the last and tests on the last.
    """

    path: str = Field(default="*", min_length=1)
    days: Literal["all", "all_but_last", "last"] = "all"
    header: bool | None = None
    delimiter: str | None = Field(default=None, min_length=1, max_length=2)
    id_column: bool = False
    pad_short_rows: bool = False
    max_rejected_fraction: float = Field(default=0.001, ge=0, le=1)
    categoricals: Literal["string", "int"] = "string"


register(
    KindDef(
        name="read_criteo",
        params=ReadCriteoParams,
        function="dagspec.stages.read_criteo:read_criteo_stage",
        version="1",
        description="Read raw Criteo logs (a path or the logs of generate_criteo_logs); bad rows quarantined.",
        inputs={"logs": InputRole(type=IOType.FILES, required=False)},
        outputs={"data": IOType.TABLE},
    )
)


class CtrFeaturesParams(StageParams):
    """Criteo columns -> model features.

    ``hashed``: a ``features`` SparseVector of 2^hash_bits dims (integers as values, categoricals as
    ``Cj=value`` tokens) + ``label``. ``as_is``: label, I1..I13 (long, nulls kept), C1..C26 parsed
    from hex to 32-bit ints (nulls kept), for tree models.
    """

    mode: Literal["hashed", "as_is"]
    hash_bits: int = Field(default=17, ge=4, le=28)
    log1p: bool = Field(default=False, description="hashed: log1p(x) for positive integer values")
    label_col: str = "label"
    features_col: str = "features"
    keep_cols: list[str] = Field(default_factory=list, description="extra input columns carried through")


register(
    KindDef(
        name="ctr_features",
        params=CtrFeaturesParams,
        function="dagspec.stages.ctr_features:ctr_features",
        version="1",
        description="Criteo rows -> hashed SparseVector features, or the 39 columns as numbers for trees.",
        inputs={"data": InputRole()},
        outputs={"data": IOType.TABLE},
    )
)


class TrainXGBoostParams(StageParams):
    """XGBoost binary classifier; defaults are the Criteo benchmark's tuned parameters.

    ``workers: 1`` trains in the driver process from the Parquet shards (pyarrow, no Spark collect);
    ``workers >= 2`` uses ``xgboost.spark.SparkXGBClassifier`` over that many Spark tasks.
    ``features_col``: a vector column (hashed) or ``null`` for the as_is columns (every column but the label).
    """

    workers: int = Field(default=1, ge=1)
    label_col: str = "label"
    features_col: str | None = None
    booster: Literal["gbtree", "dart"] = "gbtree"
    max_depth: int = Field(default=7, ge=1)
    num_round: int = Field(default=200, ge=1)
    eta: float = Field(default=0.2, gt=0)
    gamma: float = Field(default=0.4, ge=0)
    subsample: float = Field(default=0.8, gt=0, le=1)
    colsample_bytree: float = Field(default=0.8, gt=0, le=1)
    min_child_weight: float = Field(default=20, ge=0)
    alpha: float = Field(default=3, ge=0)
    lambda_: float = Field(default=100, ge=0, alias="lambda")
    tree_method: Literal["hist", "approx", "exact"] = "hist"
    max_bin: int = Field(default=256, ge=2)
    nthread: int = Field(default=0, ge=0, description="single node: threads (0 = all cores)")
    seed: int = 42
    checkpoint_every: int = Field(default=20, ge=1, description="rounds between resumable checkpoints")
    batch_rows: int = Field(default=65536, ge=1, description="single node: rows per Arrow batch fed to xgboost")
    in_memory_max_mb: int = Field(
        default=2048,
        ge=0,
        description="single node: training data up to this size (uncompressed, from the Parquet footers) is"
        " read in one piece; larger data streams through a DataIter in batch_rows batches (0 = always stream)",
    )

    def booster_params(self) -> dict[str, float | int | str]:
        """The xgboost.train params (objective and metric included)."""
        return {
            "objective": "binary:logistic",
            "eval_metric": "logloss",
            "booster": self.booster,
            "max_depth": self.max_depth,
            "eta": self.eta,
            "gamma": self.gamma,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "min_child_weight": self.min_child_weight,
            "alpha": self.alpha,
            "lambda": self.lambda_,
            "tree_method": self.tree_method,
            "max_bin": self.max_bin,
            "seed": self.seed,
        }


_TRAIN_INPUTS = {"train": InputRole(), "validation": InputRole(required=False)}

register(
    KindDef(
        name="train_xgboost",
        params=TrainXGBoostParams,
        function="dagspec.stages.train_xgboost:train_xgboost",
        version="1",
        description="XGBoost (single node from Parquet shards, or on Spark) with checkpoint and resume.",
        inputs=_TRAIN_INPUTS,
        outputs={"model": IOType.FILES},
    )
)


class TrainSparkMLParams(StageParams):
    """Spark ML LogisticRegression (hashed features) or RandomForestClassifier (as_is columns).

    Defaults of the random forest are the benchmark's. ``features_col: null`` assembles every
    column but the label (as_is data; nulls become NaN, which Spark's trees cannot take: see
    ``missing_value``).
    """

    model: Literal["logistic_regression", "random_forest"]
    label_col: str = "label"
    features_col: str | None = "features"
    # logistic regression
    max_iter: int = Field(default=100, ge=1)
    reg_param: float = Field(
        default=1e-4, ge=0, description="L2 (or elastic net) strength; 0 on hashed features overfits (docs/ctr.md)"
    )
    elastic_net_param: float = Field(default=0.0, ge=0, le=1)
    standardization: bool = Field(
        default=False,
        description="Spark's default (true) penalizes standardized weights: a rare hashed token's raw"
        " weight escapes the penalty and overfits (see docs/ctr.md)",
    )
    # random forest
    num_trees: int = Field(default=160, ge=1)
    max_depth: int = Field(default=10, ge=1, le=30)
    max_bins: int = Field(default=64, ge=2)
    min_instances_per_node: int = Field(default=3, ge=1)
    impurity: Literal["entropy", "gini"] = "entropy"
    feature_subset_strategy: str = "sqrt"
    subsampling_rate: float = Field(default=1.0, gt=0, le=1)
    missing_value: float = Field(default=-1.0, description="as_is: the value nulls are replaced with")
    seed: int = 42


register(
    KindDef(
        name="train_spark_ml",
        params=TrainSparkMLParams,
        function="dagspec.stages.train_spark_ml:train_spark_ml",
        version="1",
        description="Spark ML LogisticRegression or RandomForestClassifier; saved Spark ML model + model.json.",
        inputs=_TRAIN_INPUTS,
        outputs={"model": IOType.FILES},
    )
)


class ReportParams(StageParams):
    """Benchmark table and learning curves from several ``evaluate`` reports (inputs: any roles).

    Each input role names one (engine, train size) point; ``points`` maps the role to them, or a
    role written ``<engine>__<size>`` (e.g. ``xgb__10000``) is parsed.
    """

    points: dict[str, tuple[str, int]] = Field(default_factory=dict, description="role -> [engine, train size]")
    engines: list[str] | None = Field(default=None, description="only these engines (default: all)")

    @field_validator("engines", mode="before")
    @classmethod
    def _engines_from_text(cls, value: object) -> object:
        # a run param rendered by Jinja arrives as "['xgb', 'lr']"; a plain "xgb, lr" works too
        if isinstance(value, str):
            return [name.strip().strip("'\"") for name in value.strip().strip("[]").split(",") if name.strip()]
        return value

    @model_validator(mode="after")
    def _sizes_positive(self) -> ReportParams:
        bad = [role for role, (_, size) in self.points.items() if size < 1]
        if bad:
            raise ValueError(f"train sizes must be >= 1 (roles {bad})")
        return self


register(
    KindDef(
        name="report",
        params=ReportParams,
        function="dagspec.stages.report:report",
        version="1",
        description="metrics.tsv (Engine, Train size, ROC AUC, Log loss, ...) + plots vs train size.",
        any_inputs=True,
        outputs={"report": IOType.FILES},
    )
)
