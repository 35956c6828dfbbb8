"""A user's own kind in a plugins folder, end to end: `dagspec list`, `dagspec run`, and its code in the cache key."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CRITEO_SAMPLE
from tests.helpers import cli_env, dagspec_cli
from tests.kinds.test_catalog import USER_KIND

pytestmark = pytest.mark.integration


def test_a_plugin_kind_runs_and_its_edits_rerun_exactly_its_stages(tmp_path: Path, airflow_home: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "team_kinds.py").write_text(USER_KIND)
    spec = tmp_path / "pipelines" / "tagged.yaml"
    spec.parent.mkdir()
    spec.write_text(
        "default_args: {retries: 0}\n"
        "stages:\n"
        f"  raw: {{kind: read, params: {{format: tsv, path: '{CRITEO_SAMPLE}', schema: criteo}}}}\n"
        "  tagged: {kind: add_column, inputs: {data: raw}, params: {name: team, value: 7}}\n"
        "  counted: {kind: sql, inputs: {t: tagged}, params: {query: 'select team, count(*) as n from t group by team'}}\n"
    )
    env = cli_env(airflow_home, DAGSPEC_PLUGINS=str(plugins), DAGSPEC_STORAGE_ROOT=str(tmp_path / "storage"))

    def dagspec(*args: str) -> subprocess.CompletedProcess[str]:
        return dagspec_cli(*args, env=env, timeout=900)

    def show() -> dict[str, dict]:
        done = dagspec("show", str(spec), "--json")
        assert done.returncode == 0, done.stderr
        return {row["name"]: row for row in json.loads(done.stdout)}

    listed = dagspec("list")
    assert "add_column" in listed.stdout and "plugin team_kinds.py" in listed.stdout

    done = dagspec("run", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = show()
    assert {r["state"] for r in rows.values()} == {"done"}
    counted = json.loads((Path(rows["counted"]["output"]) / "manifest.json").read_text())
    assert counted["outputs"]["data"]["schema"] == "struct<team:int,n:bigint>"
    assert counted["rows"] == {"data": 1}

    # a comment or a docstring is not code: nothing reruns
    source = (plugins / "team_kinds.py").read_text()
    (plugins / "team_kinds.py").write_text(source.replace('"""Add a column holding one value."""', "# reworded\n"))
    assert {r["state"] for r in show().values()} == {"done"}

    # a statement is: the plugin's stage and everything downstream of it, nothing else
    (plugins / "team_kinds.py").write_text(source.replace("F.lit(params.value)", "F.lit(params.value + 1)"))
    rows = show()
    assert rows["raw"]["state"] == "done"
    assert rows["tagged"]["reasons"] == ["code changed: team_kinds (edited)"]
    # counted's key holds tagged's content, known once tagged has run again
    assert rows["counted"]["provisional"]
    assert rows["counted"]["reasons"][0].startswith("upstream not committed yet: tagged runs first")
