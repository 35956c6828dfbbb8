"""Inference flavor ``spark_ml`` (see ``dagspec.kinds.scoring.flavor_base`` for the contract).

A saved ``PipelineModel`` runs in the JVM (nothing crosses to Python); its probability vector
becomes ``array<double>`` and ``with_prediction`` derives the class. The model directory is read
through Spark, so on a cluster it must be on storage the executors can read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagspec.kinds.scoring.flavor_base import local_path, with_prediction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dagspec.kinds.scoring.flavor_base import Scoring


def transform(scoring: Scoring) -> DataFrame:
    """``keep_cols`` + ``probability`` + ``prediction`` from the saved PipelineModel (runs in the JVM: no batches)."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    card = scoring.card
    scoring.input_columns(card.input_columns)
    model = PipelineModel.load(str(local_path(scoring.model_dir) / card.artifact))
    probability_col = card.probability_col or "__probability"
    scored = model.transform(scoring.df)
    return with_prediction(scored, scoring.keep_cols, vector_to_array(F.col(probability_col)), card.classes)
