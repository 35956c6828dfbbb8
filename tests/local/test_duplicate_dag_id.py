"""A copy of a spec beside the original, same dag_id: validate, list, show and run say so; run refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.local.cli import main
from tests.conftest import REPO
from tests.helpers import write_spec

GOOD = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
A_SAYS = "pipelines/a.yaml:1:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/b.yaml:1:9; each spec needs its own dag_id"
B_SAYS = "pipelines/b.yaml:1:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/a.yaml:1:9; each spec needs its own dag_id"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (its DAG file, pipelines/) whose pipelines/ holds a.yaml and its copy b.yaml (one stage
    changed), one dag_id."""
    write_spec(tmp_path / "pipelines", "dag_id: ctr_demo\n" + GOOD, "a.yaml")
    write_spec(tmp_path / "pipelines", "dag_id: ctr_demo\n" + GOOD.replace("data/in", "data/other"), "b.yaml")
    write_spec(tmp_path / "pipelines", "dag_id: shop\n" + GOOD, "c.yaml")
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "dagspec_pipelines.py").write_text((REPO / "dags" / "dagspec_pipelines.py").read_text())
    monkeypatch.setenv("DAGSPEC_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSPEC_AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.delenv("DAGSPEC_PIPELINES", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_validate_fails_for_both_files_naming_each_other(project: Path, capsys: pytest.CaptureFixture) -> None:
    for args in ([], ["pipelines"], ["pipelines/a.yaml", "pipelines/b.yaml"]):
        assert main(["validate", *args]) == 1
        out, err = capsys.readouterr()
        assert err.splitlines() == [A_SAYS, B_SAYS]
        assert out == ("" if args and args[0].endswith(".yaml") else "ok  pipelines/c.yaml: dag 'shop', 1 stages\n")


def test_validate_of_one_file_checks_it_against_its_folder(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["validate", "pipelines/b.yaml"]) == 1
    assert capsys.readouterr().err.splitlines() == [B_SAYS]
    assert main(["validate", "pipelines/c.yaml"]) == 0


def test_list_marks_both_invalid(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines[1:4]] == [
        ["(invalid)", "1", "errors", "pipelines/a.yaml"],
        ["(invalid)", "1", "errors", "pipelines/b.yaml"],
        ["shop", "1", "stages", "pipelines/c.yaml"],
    ]


def test_run_refuses_before_starting_anything(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "pipelines/b.yaml"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [B_SAYS] and out == ""
    assert not (project / "airflow").exists() and not (project / ".dagspec").exists()


def test_run_refuses_a_file_the_dag_file_does_not_compile(project: Path, capsys: pytest.CaptureFixture) -> None:
    """A spec named .txt beside a.yaml would run a.yaml's DAG: its own is never compiled."""
    (project / "pipelines" / "c.yaml").rename(project / "pipelines" / "c.txt")
    assert main(["run", "pipelines/c.txt"]) == 1
    assert capsys.readouterr().err == (
        "error: pipelines/c.txt: the DAG file compiles only .yaml and .yml files; rename it\n"
    )


def test_show_prints_the_plan_of_the_file_with_a_warning(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["show", "pipelines/b.yaml", "--storage-root", str(project / "storage")]) == 0
    out, err = capsys.readouterr()
    assert err == f"warning: {B_SAYS} (`dagspec run` refuses this spec)\n"
    assert out.startswith("ctr_demo: ") and "raw" in out
