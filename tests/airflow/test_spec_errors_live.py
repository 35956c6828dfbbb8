"""A refused spec beside good ones under the session's running Airflow (tests/airflow/live.py).

Airflow 3.3 marks every DAG of a file with an import error stale: hidden from ``/api/v2/dags`` and
the UI, never scheduled. The refusal must therefore be the import error of
``dags/dagspec_spec_errors.py`` (which defines no DAG), never of ``dags/dagspec_pipelines.py``,
whose DAGs stay listed. Fixing the spec clears the error at the DAG processor's next parse.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.live import Airflow, Api

pytestmark = [pytest.mark.ui, pytest.mark.integration, pytest.mark.timeout(900)]

GOOD = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
REFUSED = "errors_probe_refused.yaml"
PARSE_WAIT_S = 300.0  # the first parse on a loaded 2-core machine; later ones every 30 s


def live_specs(root: Path) -> dict[str, str]:
    """A good spec, and one an administrator's setting refuses (a conf key off the allowlist)."""
    refused = 'dag_id: errors_probe_refused\nspark:\n  conf: {spark.driver.extraJavaOptions: "-Dx=1"}\n'
    return {"errors_probe_ok.yaml": f"dag_id: errors_probe_ok\n{GOOD}", REFUSED: refused + GOOD}


def _spec_errors(api: Api) -> list[dict[str, Any]]:
    return [e for e in api.get("/api/v2/importErrors?limit=100")["import_errors"] if REFUSED in e["stack_trace"]]


def _listed(api: Api) -> dict[str, dict[str, Any]]:
    return {d["dag_id"]: d for d in api.get("/api/v2/dags?limit=100")["dags"]}


def _poll(api: Api, what: str, done: Any) -> None:
    """Wait for the DAG processor's parse; on time-out say what Airflow holds instead."""
    deadline = time.monotonic() + PARSE_WAIT_S
    while not done():
        if time.monotonic() > deadline:
            every = api.get("/api/v2/dags?limit=100&exclude_stale=false")["dags"]
            states = {d["dag_id"]: (d["relative_fileloc"], "stale" if d["is_stale"] else "listed") for d in every}
            errors = {e["filename"]: e["stack_trace"][:300] for e in api.get("/api/v2/importErrors")["import_errors"]}
            raise AssertionError(
                f"{what} not seen within {PARSE_WAIT_S:.0f} s; DAGs: {states}; import errors: {errors}"
            )
        time.sleep(1)


def test_a_refused_spec_is_an_import_error_and_hides_no_other_dag(live_airflow: Airflow) -> None:
    api, pipelines = live_airflow.api, live_airflow.root / "pipelines"
    _poll(
        api,
        "the refusal among the import errors and errors_probe_ok listed",
        lambda: _spec_errors(api) and "errors_probe_ok" in _listed(api),
    )
    (error,) = _spec_errors(api)
    assert error["filename"] == "dagspec_spec_errors.py"
    assert (
        f"SpecError: {pipelines}/{REFUSED}:3:10: spark.conf.spark.driver.extraJavaOptions: "
        "'spark.driver.extraJavaOptions' is refused: it injects JVM options"
    ) in error["stack_trace"]
    assert "Traceback" not in error["stack_trace"]
    errors = api.get("/api/v2/importErrors?limit=100")["import_errors"]
    assert [e["filename"] for e in errors if e["filename"] == "dagspec_pipelines.py"] == []

    ok = api.get("/api/v2/dags/errors_probe_ok")
    assert (ok["is_stale"], ok["has_import_errors"], ok["relative_fileloc"]) == (False, False, "dagspec_pipelines.py")
    # the other modules' DAGs of the same DAG file are listed too
    listed = _listed(api)
    assert "errors_probe_refused" not in listed
    assert {d["relative_fileloc"] for d in listed.values()} == {"dagspec_pipelines.py"}

    # the spec fixed (the conf key dropped): the next parse clears the error, the DAG appears
    (pipelines / REFUSED).write_text(f"dag_id: errors_probe_refused\n{GOOD}")
    _poll(api, "the fixed spec's DAG", lambda: not _spec_errors(api) and "errors_probe_refused" in _listed(api))
    assert not api.get("/api/v2/dags/errors_probe_ok")["is_stale"]
