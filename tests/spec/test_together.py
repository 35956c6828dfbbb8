"""Specs read together: a dag_id two files share fails both, each naming the other's file:line:col."""

from __future__ import annotations

import os
from pathlib import Path

from dagspec.errors import SpecValidationError, YamlSourceError
from dagspec.spec.loader import spec_files
from dagspec.spec.together import load_specs
from tests.helpers import write_spec

GOOD = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"


def _load(folder: Path, neighbours: list[Path] | None = None) -> dict[str, str]:
    """file -> 'ok <dag_id>' or its error text."""
    loaded = load_specs(spec_files(folder), lambda p: os.path.relpath(p, folder.parent), neighbours=neighbours or [])
    return {spec.file: f"ok {spec.spec.dag_id}" if spec.spec else str(spec.error) for spec in loaded}


def test_two_specs_with_one_dag_id_both_fail_naming_each_other(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, "dag_id: ctr_demo\n" + GOOD, "a.yaml")
    write_spec(folder, "# a copy being edited\ndag_id: ctr_demo\n" + GOOD, "b.yaml")
    write_spec(folder, "dag_id: other\n" + GOOD, "c.yaml")
    assert _load(folder) == {
        "pipelines/a.yaml": "pipelines/a.yaml:1:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/b.yaml:2:9; "
        "each spec needs its own dag_id",
        "pipelines/b.yaml": "pipelines/b.yaml:2:9: dag_id: 'ctr_demo' is also the dag_id of pipelines/a.yaml:1:9; "
        "each spec needs its own dag_id",
        "pipelines/c.yaml": "ok other",
    }


def test_a_dag_id_from_the_file_name_counts_and_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, GOOD, "shop.yaml")
    write_spec(folder, GOOD, "shop.yml")
    write_spec(folder, "dag_id: shop\n" + GOOD, "z.yaml")
    found = _load(folder)
    assert found["pipelines/shop.yaml"] == (
        "pipelines/shop.yaml:1:1: dag_id: 'shop' (the file name) is also the dag_id of "
        "pipelines/shop.yml:1:1 (its file name), pipelines/z.yaml:1:9; each spec needs its own dag_id"
    )
    assert found["pipelines/z.yaml"].startswith("pipelines/z.yaml:1:9: dag_id: 'shop' is also the dag_id of ")


def test_an_invalid_copy_still_claims_its_dag_id_and_keeps_its_own_errors(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, "dag_id: shop\n" + GOOD, "a.yaml")
    write_spec(folder, "dag_id: shop\nstages:\n  raw: {kind: reed}\n", "b.yaml")
    write_spec(folder, "dag_id: shop\nstages: [\n", "c.yaml")  # no YAML: claims nothing
    loaded = {spec.file: spec for spec in load_specs(spec_files(folder), lambda p: f"pipelines/{p.name}")}
    assert isinstance(loaded["pipelines/a.yaml"].error, SpecValidationError)
    assert str(loaded["pipelines/a.yaml"].error).endswith(
        "the dag_id of pipelines/b.yaml:1:9; each spec needs its own dag_id"
    )
    b_error = str(loaded["pipelines/b.yaml"].error).splitlines()
    assert b_error[0].startswith("pipelines/b.yaml:1:9: dag_id: 'shop' is also the dag_id of pipelines/a.yaml:1:9")
    assert b_error[1].startswith("pipelines/b.yaml:3:15: stages.raw.kind: unknown stage kind 'reed'")
    assert isinstance(loaded["pipelines/c.yaml"].error, YamlSourceError)


def test_neighbours_count_but_are_not_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    mine = write_spec(folder, "dag_id: shop\n" + GOOD, "mine.yaml")
    other = write_spec(tmp_path / "elsewhere", "dag_id: shop\nstages: {}\n", "other.yaml")
    (loaded,) = load_specs([mine], lambda p: p.name, neighbours=[mine, other])
    assert str(loaded.error) == (
        "mine.yaml:1:9: dag_id: 'shop' is also the dag_id of other.yaml:1:9; each spec needs its own dag_id"
    )
    (alone,) = load_specs([mine], lambda p: p.name, neighbours=[mine])
    assert alone.spec is not None and alone.error is None
