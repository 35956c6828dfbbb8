"""The Airflow plugin dagspec ships: registered by the ``airflow.plugins`` entry point in
pyproject.toml, so installing dagspec (``pip install -e .`` locally, ``pip install`` in the image)
is all it takes.

It mounts the results app (``dagspec.airflow.ui.app``) on the API server and adds links to it on
Airflow's pages: "dagspec results" on a DAG run, "dagspec stage" on a task instance, "dagspec
compare" on a DAG. Hrefs have no leading slash: the UI resolves them against its base URL.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from dagspec.airflow.ui.app import URL_PREFIX, create_app

_PREFIX = URL_PREFIX.strip("/")


class DagspecPlugin(AirflowPlugin):
    """dagspec's results inside the Airflow UI."""

    name = "dagspec"
    fastapi_apps: list[Any] = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "dagspec results"}]
    external_views: list[Any] = [
        {
            "name": "dagspec results",
            "href": f"{_PREFIX}/dags/{{DAG_ID}}/runs/{{RUN_ID}}",
            "destination": "dag_run",
            "url_route": "dagspec_run",
        },
        {
            "name": "dagspec stage",
            "href": f"{_PREFIX}/dags/{{DAG_ID}}/runs/{{RUN_ID}}/stages/{{TASK_ID}}",
            "destination": "task_instance",
            "url_route": "dagspec_stage",
        },
        {
            "name": "dagspec compare",
            "href": f"{_PREFIX}/dags/{{DAG_ID}}/compare",
            "destination": "dag",
            "url_route": "dagspec_compare",
        },
    ]
