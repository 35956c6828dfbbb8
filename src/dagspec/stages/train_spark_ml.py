"""Kind ``train_spark_ml``: Spark ML LogisticRegression (hashed) or RandomForestClassifier (as_is).

The saved artifact is a ``PipelineModel`` directory, so inference repeats the preprocessing: for
the as_is columns a ``SQLTransformer`` replaces nulls with ``missing_value`` (Spark's trees take
no NaN) and a ``VectorAssembler`` builds the vector. Output columns use internal names
(``__probability``, ...) so they never clash with the caller's columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dagspec.errors import StageFailedError
from dagspec.stages.ctr_resources import ResourceMonitor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagspec.kinds.ctr import TrainSparkMLParams
    from dagspec.runtime import StageContext

ARTIFACT = "spark_model"
PROBABILITY_COL = "__probability"
_NUMERIC = {"byte", "short", "integer", "long", "float", "double", "decimal"}


def train_spark_ml(inputs: Mapping[str, Any], params: TrainSparkMLParams, ctx: StageContext) -> dict[str, DataFrame]:
    """Fit the pipeline on ``train``; writes ``model/spark_model/`` and ``model/model.json``."""
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression, RandomForestClassifier
    from pyspark.ml.feature import SQLTransformer, VectorAssembler
    from pyspark.ml.linalg import VectorUDT

    train = inputs["train"]
    if params.label_col not in train.columns:
        raise StageFailedError(f"no label column {params.label_col!r} in the training data (columns: {train.columns})")
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
    common = {
        "featuresCol": features_col,
        "labelCol": params.label_col,
        "probabilityCol": PROBABILITY_COL,
        "predictionCol": "__prediction",
        "rawPredictionCol": "__raw_prediction",
    }
    if params.model == "logistic_regression":
        stages.append(
            LogisticRegression(
                maxIter=params.max_iter,
                regParam=params.reg_param,
                elasticNetParam=params.elastic_net_param,
                standardization=params.standardization,
                **common,
            )
        )
        model_params: dict[str, Any] = {
            "max_iter": params.max_iter,
            "reg_param": params.reg_param,
            "elastic_net_param": params.elastic_net_param,
            "standardization": params.standardization,
        }
    else:
        stages.append(
            RandomForestClassifier(
                numTrees=params.num_trees,
                maxDepth=params.max_depth,
                maxBins=params.max_bins,
                minInstancesPerNode=params.min_instances_per_node,
                impurity=params.impurity,
                featureSubsetStrategy=params.feature_subset_strategy,
                subsamplingRate=params.subsampling_rate,
                seed=params.seed,
                **common,
            )
        )
        model_params = {
            "num_trees": params.num_trees,
            "max_depth": params.max_depth,
            "max_bins": params.max_bins,
            "min_instances_per_node": params.min_instances_per_node,
            "impurity": params.impurity,
            "feature_subset_strategy": params.feature_subset_strategy,
            "subsampling_rate": params.subsampling_rate,
            "missing_value": params.missing_value,
            "seed": params.seed,
        }
    data = train.withColumn(params.label_col, train[params.label_col].cast("double"))
    out = ctx.local_output_dir("model")
    with ResourceMonitor() as monitor:
        model = Pipeline(stages=stages).fit(data)
    model.write().overwrite().save(str(out / ARTIFACT))
    resources = monitor.summary()
    meta = {
        "flavor": "spark_ml",
        "artifact": ARTIFACT,
        "features_col": params.features_col,
        "label_col": params.label_col,
        "input_columns": input_columns,
        "input_shapes": {},
        "classes": [0, 1],
        "task": "binary",
        "model": params.model,
        "probability_col": PROBABILITY_COL,
        "params": {"model": params.model, **model_params},
        **resources,
    }
    (out / "model.json").write_text(json.dumps(meta, indent=2))
    ctx.metrics.update({"model": params.model, **{k: v for k, v in resources.items() if k != "resource_scope"}})
    return {}
