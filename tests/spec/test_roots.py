"""A spec's ``storage.root`` and ``schedule: {files}`` stay under the deployment's roots (refused at load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec
from dagspec.spec.roots import STORAGE_ROOTS_ENV, WATCH_ROOTS_ENV, deployment_storage_root
from tests.helpers import write_spec

STAGES = "stages:\n  raw: {kind: read, params: {format: tsv, path: data/x.tsv, schema: criteo}}\n"
OUTSIDE = "outside the deployment's storage roots"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder as DAGSPEC_HOME, with no deployment root or extra roots set."""
    home = tmp_path / "project"
    (home / ".dagspec" / "storage").mkdir(parents=True)
    monkeypatch.setenv("DAGSPEC_HOME", str(home))
    for name in ("DAGSPEC_STORAGE_ROOT", STORAGE_ROOTS_ENV, WATCH_ROOTS_ENV):
        monkeypatch.delenv(name, raising=False)
    return home


def issues(folder: Path, text: str) -> list[str]:
    path = write_spec(folder, text, "rooted.yaml")
    with pytest.raises(SpecValidationError) as info:
        load_spec(path, "pipelines/rooted.yaml")
    return [str(i) for i in info.value.issues]


def storage_issue(folder: Path, root: str) -> str:
    (found,) = issues(folder, f'storage:\n  root: "{root}"\n{STAGES}')
    assert found.startswith("pipelines/rooted.yaml:2:9: storage.root: "), found
    return found


def test_the_default_root_and_folders_under_it_load(project: Path) -> None:
    assert deployment_storage_root() == str(project / ".dagspec" / "storage")
    for root in (".dagspec/storage", ".dagspec/storage/team_a", str(project / ".dagspec/storage/x")):
        spec = load_spec(write_spec(project, f"storage: {{root: '{root}'}}\n{STAGES}", "ok.yaml"))
        assert spec.storage.root == root


def test_a_root_outside_is_refused_with_file_line_and_field(project: Path) -> None:
    found = storage_issue(project, "/proc")
    assert found == (
        f"pipelines/rooted.yaml:2:9: storage.root: '/proc' is a folder {OUTSIDE} ({project}/.dagspec/storage); "
        f"an administrator can allow a root with {STORAGE_ROOTS_ENV} (docs/security.md)"
    )
    # the folder above the project, the probe that reached Airflow's password file through the UI
    assert f"'{project.parent}' is a folder {OUTSIDE}" in storage_issue(project, str(project.parent))


def test_dot_dot_and_symlinks_are_resolved_before_the_check(project: Path, tmp_path: Path) -> None:
    assert f"'.dagspec/storage/../..' (resolved: {project}) is a folder {OUTSIDE}" in storage_issue(
        project, ".dagspec/storage/../.."
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".dagspec" / "storage" / "link").symlink_to(elsewhere)
    found = storage_issue(project, ".dagspec/storage/link/x")
    assert f"'.dagspec/storage/link/x' (resolved: {elsewhere}/x) is a folder {OUTSIDE}" in found


def test_a_uri_root_only_under_a_uri_the_administrator_lists(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert f"'http://127.0.0.1:8080/x' is a URI {OUTSIDE}" in storage_issue(project, "http://127.0.0.1:8080/x")
    monkeypatch.setenv(STORAGE_ROOTS_ENV, "s3a://bucket/dagspec, /srv/checkpoints")
    for root in ("s3a://bucket/dagspec", "s3a://bucket/dagspec/team_a", "/srv/checkpoints/a"):
        assert load_spec(write_spec(project, f"storage: {{root: '{root}'}}\n{STAGES}", "ok.yaml")).storage.root == root
    for root in (
        "s3a://bucket/dagspec/../other",
        "s3a://bucket/dagspec/%2e%2E/x",
        "s3a://bucket/dagspecx",
        "s3a://other/dagspec",
        "/srv/check",
    ):
        assert OUTSIDE in storage_issue(project, root), root


def test_the_deployment_root_is_allowed(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOT", str(tmp_path / "deployed"))
    assert deployment_storage_root() == str(tmp_path / "deployed")
    spec = load_spec(write_spec(project, f"storage: {{root: '{tmp_path}/deployed/a'}}\n{STAGES}", "ok.yaml"))
    assert spec.storage.root == f"{tmp_path}/deployed/a"
    assert OUTSIDE in storage_issue(project, str(tmp_path / "other"))


def glob_issue(folder: Path, glob: str) -> str:
    (found,) = issues(folder, f'schedule: {{files: "{glob}"}}\n{STAGES}')
    assert found.startswith("pipelines/rooted.yaml:1:19: schedule.files: "), found
    return found


def test_a_files_glob_stays_under_the_project_or_a_watch_root(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert glob_issue(project, "/**/*") == (
        f"pipelines/rooted.yaml:1:19: schedule.files: '/**/*' lists /, outside the project and the deployment's "
        f"watch roots ({project}); an administrator can allow a folder with {WATCH_ROOTS_ENV} (docs/security.md)"
    )
    assert "'/proc/*/status' lists /proc, outside" in glob_issue(project, "/proc/*/status")
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (project / "data").mkdir()
    (project / "data" / "in").symlink_to(incoming)
    assert f"'data/in/*.tsv' lists {incoming}, outside" in glob_issue(project, "data/in/*.tsv")
    assert "lists" in glob_issue(project, f"{incoming}/day_*.tsv")
    monkeypatch.setenv(WATCH_ROOTS_ENV, str(incoming))
    for glob in ("data/in/*.tsv", f"{incoming}/day_*.tsv", "data/**/*.tsv", f"{project}/x/*.tsv"):
        spec = load_spec(write_spec(project, f'schedule: {{files: "{glob}"}}\n{STAGES}', "ok.yaml"))
        assert spec.schedule is not None, glob
