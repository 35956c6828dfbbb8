"""One folder per export: two stages publishing to one folder, or to folders inside each other, fail
both, in one spec or across the specs read together, each naming the other's file:line and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError
from dagspec.spec.loader import load_spec, spec_files
from dagspec.spec.together import load_specs
from tests.conftest import REPO
from tests.helpers import write_spec

RAW = "stages:\n  raw: {kind: read, params: {format: parquet, path: data/in}}\n"
TAIL = "; give each export a folder of its own, outside the others'"


def _spec(path: str, *, header: str = "", name: str = "out") -> str:
    return f"{header}{RAW}  {name}: {{kind: export, inputs: {{data: raw}}, params: {{path: {path}}}}}\n"


def _load(folder: Path, neighbours: list[Path] | None = None) -> dict[str, str]:
    """file -> 'ok' or its error text."""
    loaded = load_specs(spec_files(folder), lambda p: os.path.relpath(p, folder.parent), neighbours=neighbours or [])
    return {spec.file: "ok" if spec.spec else str(spec.error) for spec in loaded}


def test_two_specs_publishing_to_one_folder_both_fail_naming_each_other(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, _spec("out/ctr/train"), "a.yaml")
    write_spec(folder, "# a copy with its own dag_id\n" + _spec("out/ctr//train/"), "b.yaml")
    write_spec(folder, _spec("out/ctr/test"), "c.yaml")
    assert _load(folder) == {
        "pipelines/a.yaml": "pipelines/a.yaml:3:59: stages.out.params.path: publishes to out/ctr/train, as "
        "pipelines/b.yaml:4:59 stages.out.params.path does: each run of one would replace the other's export" + TAIL,
        "pipelines/b.yaml": "pipelines/b.yaml:4:59: stages.out.params.path: publishes to out/ctr/train, as "
        "pipelines/a.yaml:3:59 stages.out.params.path does: each run of one would replace the other's export" + TAIL,
        "pipelines/c.yaml": "ok",
    }


def test_a_folder_inside_another_specs_export_fails_both(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, _spec("out/ctr"), "a.yaml")
    write_spec(folder, _spec("out/ctr/train"), "b.yaml")
    write_spec(folder, _spec("out/ctr_other"), "c.yaml")  # a sibling whose name only starts alike
    assert _load(folder) == {
        "pipelines/a.yaml": "pipelines/a.yaml:3:59: stages.out.params.path: publishes to out/ctr, which holds "
        "out/ctr/train, where pipelines/b.yaml:3:59 stages.out.params.path publishes: publishing this one would "
        "delete that export, and that one would write into this one" + TAIL,
        "pipelines/b.yaml": "pipelines/b.yaml:3:59: stages.out.params.path: publishes to out/ctr/train, inside "
        "out/ctr, where pipelines/a.yaml:3:59 stages.out.params.path publishes: publishing that one would delete "
        "this export, and this one would write into it" + TAIL,
        "pipelines/c.yaml": "ok",
    }


def test_a_templated_path_is_compared_at_the_params_defaults(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    params = "params:\n  fraction: {type: number, default: 0.2}\n"
    write_spec(folder, _spec('"out/{{ params.fraction }}/train"', header=params), "a.yaml")
    write_spec(folder, _spec("out/0.2/train"), "b.yaml")
    errors = _load(folder)
    assert errors["pipelines/a.yaml"].startswith(
        "pipelines/a.yaml:5:59: stages.out.params.path: publishes to out/0.2/train (at the params' defaults), "
        "as pipelines/b.yaml:3:59 stages.out.params.path does"
    )
    assert errors["pipelines/b.yaml"].startswith(
        "pipelines/b.yaml:3:59: stages.out.params.path: publishes to out/0.2/train, as pipelines/a.yaml:5:59"
    )
    write_spec(folder, _spec("out/0.3/train"), "b.yaml")  # another value: another folder
    assert _load(folder) == {"pipelines/a.yaml": "ok", "pipelines/b.yaml": "ok"}


def test_specs_under_other_storage_roots_never_collide(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    write_spec(folder, _spec("out/x", header="storage: {root: .dagspec/storage/a}\n"), "a.yaml")
    write_spec(folder, _spec("out/x", header="storage: {root: .dagspec/storage/b}\n"), "b.yaml")
    assert _load(folder) == {"pipelines/a.yaml": "ok", "pipelines/b.yaml": "ok"}


def test_a_file_validated_alone_is_checked_against_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    mine = write_spec(folder, _spec("out/x"), "a.yaml")
    other = write_spec(folder, _spec("out/x", name="published"), "b.yaml")
    (loaded,) = load_specs([mine], lambda p: p.name, neighbours=[mine, other])
    assert str(loaded.error) == (
        "a.yaml:3:59: stages.out.params.path: publishes to out/x, as b.yaml:3:65 stages.published.params.path "
        "does: each run of one would replace the other's export" + TAIL
    )


def test_two_stages_of_one_spec_publishing_to_nested_folders_fail(tmp_path: Path) -> None:
    text = _spec("out/x") + "  again: {kind: export, inputs: {data: raw}, params: {path: out/x/y}}\n"
    with pytest.raises(SpecValidationError) as info:
        load_spec(write_spec(tmp_path, text), "pipe.yaml")
    assert [str(issue) for issue in info.value.issues] == [
        "pipe.yaml:3:59: stages.out.params.path: publishes to out/x, which holds out/x/y, where pipe.yaml:4:61 "
        "stages.again.params.path publishes: publishing this one would delete that export, and that one would "
        "write into this one" + TAIL,
        "pipe.yaml:4:61: stages.again.params.path: publishes to out/x/y, inside out/x, where pipe.yaml:3:59 "
        "stages.out.params.path publishes: publishing that one would delete this export, and this one would "
        "write into it" + TAIL,
    ]


def test_a_matrix_export_needs_the_matrix_in_its_path(tmp_path: Path) -> None:
    text = (
        RAW + "  out:\n    kind: export\n    matrix: {n: [1, 2]}\n    inputs: {data: raw}\n    params: {path: out/m}\n"
    )
    with pytest.raises(SpecValidationError) as info:
        load_spec(write_spec(tmp_path, text), "pipe.yaml")
    assert str(info.value) == (
        "pipe.yaml:7:20: stages.out.params.path: the expansions 'out__1' and 'out__2' of this matrix stage both "
        "publish to out/m: put a {{ matrix.NAME }} in the path, so that each publishes to a folder of its own"
    )
    load_spec(write_spec(tmp_path, text.replace("out/m", '"out/m{{ matrix.n }}"')))


def test_the_shipped_pipelines_publish_to_folders_of_their_own() -> None:
    loaded = load_specs(spec_files(REPO / "pipelines"), lambda p: p.name)
    assert {spec.file: str(spec.error or "ok") for spec in loaded} == {spec.file: "ok" for spec in loaded}
