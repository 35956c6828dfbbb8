"""The params of ``train_xgboost``, apart from the kind: ``xgboost_data`` reads them too, and the kind imports it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dagspec.kinds.base import StageParams


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
    external_min_mb: int = Field(
        default=0,
        ge=0,
        description="single node: training data from this size (uncompressed) on streams into xgboost's external"
        " memory, its quantized pages cached on local disk in the stage's scratch directory and read back every"
        " round (less memory, slower rounds; 0 = never)",
    )
    load: Literal["auto", "memory", "stream", "external"] = Field(
        default="auto",
        description="single node: how the training data is loaded; auto decides by in_memory_max_mb and external_min_mb",
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
