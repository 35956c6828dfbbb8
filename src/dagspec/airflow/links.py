"""The "Spark UI" extra link of a stage's task (Airflow's operator extra links).

The link points at dagspec's view in the Airflow UI (behind Airflow's login), which sends the
browser on to the Spark History Server's page of the application that computed the stage, or of the
running applications while the stage has recorded nothing yet (``dagspec.airflow.ui.spark``). Being
one URL whatever the task's state, it is pushed when the task starts (Airflow itself stores a link
only when the task ends) and so is there while the stage runs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

URL_PREFIX = "/dagspec"  # where the plugin mounts dagspec's view on the API server


def spark_ui_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The link's URL: under Airflow's ``[api] base_url`` when one is set, else a path on its host."""
    from airflow.configuration import conf

    base = str(conf.get("api", "base_url", fallback="") or "").rstrip("/")
    dag, run, task = (quote(part, safe="") for part in (dag_id, run_id, task_id))
    return f"{base}{URL_PREFIX}/spark/dags/{dag}/runs/{run}/stages/{task}"


class SparkUILink(BaseOperatorLink):
    """A task's link to the Spark UI of its stage."""

    name = "Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return spark_ui_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id)
