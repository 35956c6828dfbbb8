"""dagspec's view in the Airflow UI: an Airflow plugin (``plugin``) mounting a small FastAPI app
(``app``) on the API server, with links on the DAG, run and task pages.

What it shows is read from the committed checkpoints (manifests, reports, model cards) with json
and plain file reads: no Spark, TensorFlow or pandas in the API server. DAG parsing imports none of
this package.
"""

from dagspec.airflow.links import URL_PREFIX  # where the plugin mounts the app on the API server

__all__ = ["URL_PREFIX"]
