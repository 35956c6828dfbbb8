"""The UI plugin as Airflow loads it: registered by the package, and cheap for every process that loads it."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points


def test_loading_the_plugin_builds_no_app_until_the_api_server_asks() -> None:
    # every task process loads the plugins (macros, listeners): the app and Airflow's API security
    # cost it ~1.2 CPU s, so only the API server's reading of fastapi_apps imports them
    probe = (
        "import sys; from dagspec.airflow.ui.plugin import DagspecPlugin; plugin = DagspecPlugin(); "
        "heavy = ('dagspec.airflow.ui.app', 'airflow.api_fastapi.core_api.security', 'fastapi'); "
        "print('loaded:', sorted(m for m in heavy if m in sys.modules)); plugin.fastapi_apps; "
        "print('loaded:', sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    before, after = [line for line in done.stdout.splitlines() if line.startswith("loaded: ")]
    assert before == "loaded: []"
    assert "'dagspec.airflow.ui.app'" in after and "'airflow.api_fastapi.core_api.security'" in after


def test_the_plugin_is_registered_by_the_package_and_links_from_run_task_and_dag_pages() -> None:
    found = [e for e in entry_points(group="airflow.plugins") if e.name == "dagspec"]
    assert [e.value for e in found] == ["dagspec.airflow.ui.plugin:DagspecPlugin"]
    plugin = found[0].load()()  # as Airflow's plugins manager makes it
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/dagspec"]
    views = {v["destination"]: v["href"] for v in plugin.external_views}
    assert views == {
        "dag_run": "dagspec/dags/{DAG_ID}/runs/{RUN_ID}",
        "task_instance": "dagspec/dags/{DAG_ID}/runs/{RUN_ID}/stages/{TASK_ID}",
        "dag": "dagspec/dags/{DAG_ID}/compare",
    }
