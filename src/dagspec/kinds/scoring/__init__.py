"""The model-consuming kinds: predict (batch inference), evaluate (metrics and ROC), compare.

predict and evaluate take a saved model through the files input ``model``: any training kind's
``model`` output. A model directory holds the model's artifact in its library's own format (a
``.keras`` file, an XGBoost booster, a Spark ``PipelineModel`` directory) and ``model.json``,
which names the flavor, the artifact and the classes (``docs/architecture.md``, "Models").
``models.transform_with_model`` applies any flavor of the registry ``flavors`` (``flavor_keras``,
``flavor_xgboost``, ``flavor_spark_ml``, all keeping the contract in ``flavor_base``) to a table;
compare reads the reports evaluate writes.
"""
