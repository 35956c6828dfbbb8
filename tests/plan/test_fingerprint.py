"""The cache key follows code, data and conf: real files and real module sources, no mocked hashes."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from dagspec.plan import fingerprint
from dagspec.plan.fingerprint import code_hashes, data_identity, result_conf
from dagspec.plan.reasons import key_changes
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.helpers import write_spec

MODULE = '''
"""A user package's kind module."""
from acme.helpers import double


def compute(x):
    # a comment
    return double(x) + 1
'''
HELPERS = '''
def double(x):
    """Twice x."""
    return 2 * x
'''


def _fresh_hashes(module: str) -> dict[str, str]:
    code_hashes.cache_clear()
    fingerprint._parsed.cache_clear()
    return code_hashes(module)


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "acme"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kind.py").write_text(MODULE)
    (package / "helpers.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import acme.kind  # noqa: F401  (the catalog imports kind modules before keying them)

    yield package
    for name in [m for m in sys.modules if m == "acme" or m.startswith("acme.")]:
        del sys.modules[name]
    code_hashes.cache_clear()


def test_the_code_hash_follows_the_module_and_what_it_imports_not_comments(acme: Path) -> None:
    before = _fresh_hashes("acme.kind")
    assert {"acme.kind", "acme.helpers", "dagspec.job.runtime"} <= set(before)
    assert not any(m.startswith(("pyspark", "numpy")) for m in before)  # third-party: versions instead

    (acme / "kind.py").write_text(MODULE.replace("# a comment", "# reworded, and a docstring:\n    '''doc'''"))
    (acme / "helpers.py").write_text(HELPERS.replace('"""Twice x."""', '"""Two times x."""') + "\n\n")
    assert _fresh_hashes("acme.kind") == before

    (acme / "helpers.py").write_text(HELPERS.replace("2 * x", "x + x"))
    after = _fresh_hashes("acme.kind")
    assert key_changes({"code": before}, {"code": after}) == ["code changed: acme.helpers (edited)"]


def test_data_identity_sees_a_rewrite_and_a_new_file_in_a_glob(tmp_path: Path) -> None:
    (tmp_path / "day_00.tsv").write_text("1\t2\n")
    (tmp_path / "day_01.tsv").write_text("3\t4\n")
    (tmp_path / "_SUCCESS").write_text("")
    first, files = data_identity([f"{tmp_path}/day_*.tsv"], tmp_path)
    assert files == [str(tmp_path / "day_00.tsv"), str(tmp_path / "day_01.tsv")]

    stamp = time.time() + 5  # same size, later modification time: rewritten in place
    (tmp_path / "day_01.tsv").write_text("5\t6\n")
    os.utime(tmp_path / "day_01.tsv", (stamp, stamp))
    (tmp_path / "day_02.tsv").write_text("7\t8\n")
    second, _ = data_identity([f"{tmp_path}/day_*.tsv"], tmp_path)
    assert key_changes({"data": first}, {"data": second}) == [
        f"input data changed: {tmp_path}/day_01.tsv modified",
        f"input data changed: {tmp_path}/day_02.tsv added",
    ]
    braces, _ = data_identity([f"{tmp_path}/day_{{00,02}}.tsv"], tmp_path)
    assert sorted(braces) == [str(tmp_path / "day_00.tsv"), str(tmp_path / "day_02.tsv")]


def test_result_conf_keeps_what_changes_results_and_drops_resources() -> None:
    conf = {
        "spark.sql.ansi.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.legacy.timeParserPolicy": "LEGACY",
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.memory": "4g",
        "spark.ui.port": "4050",
        "spark.dynamicAllocation.enabled": "true",
    }
    assert result_conf(conf) == {
        "spark.sql.ansi.enabled": "true",
        "spark.sql.legacy.timeParserPolicy": "LEGACY",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
    }


SPEC = """
spark: {conf: {spark.sql.ansi.enabled: false, spark.executor.memory: 2g}}
stages:
  raw: {kind: read, params: {format: csv, path: "DATA/*.csv", header: true}}
  picked: {kind: sql, inputs: {t: raw}, params: {query: "select * from t"}}
"""


def _plan(tmp_path: Path, spec_text: str):
    spec = load_spec(write_spec(tmp_path / "p", spec_text.replace("DATA", str(tmp_path / "data"))))
    return resolve_pipeline(spec, default_context(spec), home=tmp_path, storage_root=str(tmp_path / "s"))


def test_conf_and_data_changes_reach_the_fingerprints_resources_do_not(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n1\n")
    base = _plan(tmp_path, SPEC)
    assert base["raw"].source_files == [str(tmp_path / "data" / "a.csv")]

    memory = _plan(tmp_path, SPEC.replace("2g", "8g"))
    assert {n: s.fingerprint for n, s in memory.items()} == {n: s.fingerprint for n, s in base.items()}

    ansi = _plan(tmp_path, SPEC.replace("ansi.enabled: false", "ansi.enabled: true"))
    assert all(ansi[n].fingerprint != base[n].fingerprint for n in base)
    assert key_changes(base["raw"].key, ansi["raw"].key) == ["spark conf changed: spark.sql.ansi.enabled false -> true"]

    (tmp_path / "data" / "b.csv").write_text("x\n2\n")
    more = _plan(tmp_path, SPEC)
    assert more["raw"].fingerprint != base["raw"].fingerprint
    assert more["picked"].fingerprint != base["picked"].fingerprint
    assert key_changes(base["picked"].key, more["picked"].key) == ["upstream changed: raw (input t)"]


def test_a_stage_keyed_without_files_says_so(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    plan = _plan(tmp_path, SPEC)
    assert plan["raw"].key["data"] == {f"{tmp_path}/data/*.csv": "no files match"}
