"""`dagspec run` of a spec whose query Spark refuses: the root cause, located in the spec, comes first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CRITEO_SAMPLE, REPO

pytestmark = pytest.mark.integration
DAGSPEC = str(Path(sys.executable).parent / "dagspec")

SPEC = f"""default_args: {{retries: 0}}
stages:
  raw: {{kind: read, params: {{format: tsv, path: '{CRITEO_SAMPLE}', schema: criteo}}}}
  enriched:
    kind: sql
    inputs: {{data: raw}}
    params:
      query: select label,, label from data
"""


def test_a_broken_query_fails_with_its_cause_and_spec_position_first(tmp_path: Path, airflow_home: Path) -> None:
    spec = tmp_path / "pipelines" / "broken_query.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC"))}
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_MODE="spark")
    storage = tmp_path / "storage"
    done = subprocess.run(
        [DAGSPEC, "run", str(spec), "--storage-root", str(storage)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    cause = (
        "[PARSE_SYNTAX_ERROR] Syntax error at or near ',' (line 1, pos 13) in stages.enriched.params.query "
        f"({spec}:8:14)"
    )
    assert done.stderr.splitlines()[0] == f"stage 'enriched' ({spec}:4:3, kind sql) failed: {cause}"
    assert "--- last lines of the log ---" in done.stderr  # the tail stays below
    # the task's own failure (what the Airflow UI shows) says it first, and the attempt's record keeps it
    record = next((storage / "broken_query" / "enriched").glob("_failed-*.json"))
    assert json.loads(record.read_text())["line"] == done.stderr.splitlines()[0]
