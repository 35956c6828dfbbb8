"""A copy of a spec under another dag_id, its export unchanged: validate fails both, run refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.local.cli import main
from tests.conftest import REPO
from tests.helpers import write_spec

SPEC = """\
stages:
  raw: {kind: read, params: {format: parquet, path: data/in}}
  train_out: {kind: export, inputs: {data: raw}, params: {path: out/ctr/train}}
"""
TAIL = (
    "does: each run of one would replace the other's export; give each export a folder of its own, outside the others'"
)
A_SAYS = f"pipelines/a.yaml:3:65: stages.train_out.params.path: publishes to out/ctr/train, as pipelines/b.yaml:3:65 stages.train_out.params.path {TAIL}"
B_SAYS = f"pipelines/b.yaml:3:65: stages.train_out.params.path: publishes to out/ctr/train, as pipelines/a.yaml:3:65 stages.train_out.params.path {TAIL}"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (its DAG file, pipelines/) holding a.yaml and b.yaml, a copy under another dag_id."""
    write_spec(tmp_path / "pipelines", SPEC, "a.yaml")
    write_spec(tmp_path / "pipelines", SPEC, "b.yaml")
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "dagspec_pipelines.py").write_text((REPO / "dags" / "dagspec_pipelines.py").read_text())
    monkeypatch.setenv("DAGSPEC_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSPEC_AIRFLOW_HOME", str(tmp_path / "airflow"))
    for name in ("DAGSPEC_PIPELINES", "DAGSPEC_STORAGE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_validate_fails_both_and_run_refuses_before_starting_anything(
    project: Path, capsys: pytest.CaptureFixture
) -> None:
    for args in ([], ["pipelines/b.yaml"]):
        assert main(["validate", *args]) == 1
        assert capsys.readouterr().err.splitlines() == ([A_SAYS, B_SAYS] if not args else [B_SAYS])
    assert main(["run", "pipelines/b.yaml"]) == 1
    assert capsys.readouterr() == ("", B_SAYS + "\n")
    assert not (project / "airflow").exists() and not (project / ".dagspec").exists()
    assert main(["show", "pipelines/b.yaml"]) == 0
    assert capsys.readouterr().err == f"warning: {B_SAYS} (`dagspec run` refuses this spec)\n"


def test_another_storage_root_is_another_folder(project: Path, capsys: pytest.CaptureFixture) -> None:
    (project / "pipelines" / "b.yaml").write_text("storage: {root: .dagspec/storage/other}\n" + SPEC)
    assert main(["validate"]) == 0
    assert capsys.readouterr().err == ""
