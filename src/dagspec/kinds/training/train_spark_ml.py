"""Kind ``train_spark_ml``: Spark ML LogisticRegression (hashed) or RandomForestClassifier (as_is).

The saved artifact is a ``PipelineModel`` directory, so inference repeats the preprocessing: for
the as_is columns a ``SQLTransformer`` replaces nulls with ``missing_value`` (Spark's trees take
no NaN) and a ``VectorAssembler`` builds the vector. Output columns use internal names
(``__probability``, ...) so they never clash with the caller's columns.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.model_card import ModelCard, training_data
from dagspec.kinds.training.trainer import MODEL_OUTPUT, TRAINER_INPUTS

ARTIFACT = "spark_model"
PROBABILITY_COL = "__probability"
_NUMERIC = {"byte", "short", "integer", "long", "float", "double", "decimal"}
# per model: each param the card records -> its Spark ML argument ("": none, it is applied before the fit)
_MODEL_PARAMS: dict[str, dict[str, str]] = {
    "logistic_regression": {
        "max_iter": "maxIter",
        "reg_param": "regParam",
        "elastic_net_param": "elasticNetParam",
        "standardization": "standardization",
    },
    "random_forest": {
        "num_trees": "numTrees",
        "max_depth": "maxDepth",
        "max_bins": "maxBins",
        "min_instances_per_node": "minInstancesPerNode",
        "impurity": "impurity",
        "feature_subset_strategy": "featureSubsetStrategy",
        "subsampling_rate": "subsamplingRate",
        "missing_value": "",
        "seed": "seed",
    },
}


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


@kind(
    "train_spark_ml",
    params=TrainSparkMLParams,
    inputs=TRAINER_INPUTS,
    outputs=MODEL_OUTPUT,
    driver="own",
    driver_reason="a Spark ML fit keeps its optimizer state on the driver; a shared Connect server would "
    "hold every stage's",
)
def train_spark_ml(inputs: Inputs, params: TrainSparkMLParams, ctx: StageContext) -> Outputs:
    """Spark ML LogisticRegression or RandomForestClassifier; saved Spark ML model + model.json.

    Fits the pipeline on ``train``; writes ``model/spark_model/`` and ``model/model.json``.
    """
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression, RandomForestClassifier
    from pyspark.ml.feature import SQLTransformer, VectorAssembler
    from pyspark.ml.linalg import VectorUDT

    from dagspec.kinds.quality.labels import require_labels
    from dagspec.kinds.training.resources import ResourceMonitor

    train = inputs.table("train")
    if params.label_col not in train.columns:
        raise StageFailedError(f"no label column {params.label_col!r} in the training data (columns: {train.columns})")
    require_labels(train, params.label_col, [0, 1], who="train_spark_ml", role="train")
    stages: list[Any] = []
    features_col = params.features_col
    if features_col is not None and features_col not in train.columns:
        vectors = [f.name for f in train.schema.fields if isinstance(f.dataType, VectorUDT)]
        raise StageFailedError(
            f"features_col {features_col!r} is not in the data (vector columns: {vectors}); "
            "set features_col: null to assemble the numeric columns (as_is)"
        )
    if features_col is not None:
        input_columns = [features_col]
    else:
        input_columns = [f.name for f in train.schema.fields if f.name != params.label_col]
        bad = [f.name for f in train.schema.fields if f.name in input_columns and f.dataType.typeName() not in _NUMERIC]
        if bad:
            raise StageFailedError(f"features_col: null needs numeric columns only; not numeric: {bad}")
        filled = ", ".join(
            f"coalesce(CAST(`{c}` AS DOUBLE), {params.missing_value!r}) AS `__f_{c}`" for c in input_columns
        )
        stages.append(SQLTransformer(statement=f"SELECT *, {filled} FROM __THIS__"))
        stages.append(VectorAssembler(inputCols=[f"__f_{c}" for c in input_columns], outputCol="__features"))
        features_col = "__features"
    common: dict[str, Any] = {
        "featuresCol": features_col,
        "labelCol": params.label_col,
        "probabilityCol": PROBABILITY_COL,
        "predictionCol": "__prediction",
        "rawPredictionCol": "__raw_prediction",
    }
    # the card records the model's params by their names here; Spark ML takes them by its own
    model_params = {name: getattr(params, name) for name in _MODEL_PARAMS[params.model]}
    spark_args = {arg: model_params[name] for name, arg in _MODEL_PARAMS[params.model].items() if arg}
    estimator = LogisticRegression if params.model == "logistic_regression" else RandomForestClassifier
    stages.append(estimator(**spark_args, **common))
    data = train.withColumn(params.label_col, train[params.label_col].cast("double"))
    out = ctx.local_output_dir("model")
    with ResourceMonitor() as monitor:
        model = Pipeline(stages=stages).fit(data)
    model.write().overwrite().save(str(out / ARTIFACT))
    resources = monitor.summary()
    ModelCard(
        flavor="spark_ml",
        kind="train_spark_ml",
        artifact=ARTIFACT,
        features_col=params.features_col,
        label_col=params.label_col,
        input_columns=input_columns,
        classes=[0, 1],
        task="binary",
        probability_col=PROBABILITY_COL,
        params={"model": params.model, **model_params},
        trained_on=training_data(ctx),
        model=params.model,
        **resources,
    ).write(out)
    ctx.metrics.update({"model": params.model, **{k: v for k, v in resources.items() if k != "resource_scope"}})
    return {}
