"""The Airflow plugin dagspec ships: registered by the ``airflow.plugins`` entry point in
pyproject.toml, so installing dagspec (``pip install -e .`` locally, ``pip install`` in the image)
is all it takes.

It mounts the results app (``dagspec.airflow.ui.app``) on the API server and adds links to it on
Airflow's pages: "dagspec results" on a DAG run, "dagspec stage" on a task instance, "dagspec
compare" on a DAG. Hrefs have no leading slash: the UI resolves them against its base URL.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from dagspec.airflow.ui import URL_PREFIX

_PREFIX = URL_PREFIX.strip("/")


class DagspecPlugin(AirflowPlugin):
    """dagspec's results inside the Airflow UI."""

    name = "dagspec"

    @cached_property
    def fastapi_apps(self) -> list[Any]:  # type: ignore[override]
        """Built when the API server asks: every task process loads the plugins too (for macros and
        listeners), and importing the app and Airflow's API security cost it ~1.2 CPU s each time."""
        from dagspec.airflow.ui.app import create_app

        return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "dagspec results"}]

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
