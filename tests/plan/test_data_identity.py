"""A source stage's data identity lists what Spark reads: real files and folders, real symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dagspec import storage
from dagspec.plan.fingerprint import data_identity
from dagspec.plan.reasons import key_changes
from dagspec.spec.loader import load_spec
from tests.helpers import manifest, run_pipeline_in_process, write_spec


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _rewrite_same_size(path: Path, text: str) -> None:
    """New bytes of the same length, a later modification time: what a job rewriting a file leaves."""
    stamp = path.stat().st_mtime + 7
    path.write_text(text)
    os.utime(path, (stamp, stamp))


def _identity(folder: Path) -> dict[str, str]:
    return data_identity([str(folder)], folder)[0]


def test_spark_skips_names_as_hadoop_fs_utils_does() -> None:
    skipped = ["_SUCCESS", "_temporary", ".hidden", ".part-0.crc", "part-0.csv._COPYING_", "_k=1._COPYING_"]
    kept = ["part-0.csv", "_k=1", "k=1", "_metadata", "_common_metadata", "_metadata_x", "a_b", "x.COPYING"]
    assert [n for n in skipped if not storage.spark_skips(n)] == []
    assert [n for n in kept if storage.spark_skips(n)] == []


def test_files_in_underscore_partition_folders_count_and_ignored_files_do_not(tmp_path: Path) -> None:
    data = tmp_path / "data"
    part = _write(data / "_day=1" / "part-0.csv", "a,b\n1,2\n")
    _write(data / "k=2" / "part-0.csv", "a,b\n3,4\n")
    ignored = [
        _write(data / "_SUCCESS", ""),
        _write(data / ".hidden.csv", "x\n"),
        _write(data / "_day=1" / ".part-0.csv.crc", "crc"),
        _write(data / "_temporary" / "0" / "part-9.csv", "a,b\n9,9\n"),
        _write(data / ".staging" / "part-8.csv", "a,b\n8,8\n"),
        _write(data / "_metadata", "PAR1 summary: listed by Spark, never read as data"),
        _write(data / "k=2" / "part-1.csv._COPYING_", "a,b\n"),
    ]
    first = _identity(data)
    assert sorted(first) == [str(part), str(data / "k=2" / "part-0.csv")]

    for path in ignored:
        _rewrite_same_size(path, path.read_text().upper() or "")
    assert _identity(data) == first

    _rewrite_same_size(part, "a,b\n5,6\n")
    assert key_changes({"data": first}, {"data": _identity(data)}) == [f"input data changed: {part} modified"]


def test_a_symlinked_folder_is_followed_and_a_loop_listed_once(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    _write(data / "own.csv", "a\n1\n")
    linked = _write(elsewhere / "year=2026" / "part-0.csv", "a\n2\n")
    (data / "more").symlink_to(elsewhere, target_is_directory=True)
    (data / "again").symlink_to(".", target_is_directory=True)  # a folder inside itself
    first = _identity(data)
    through_link = str(data / "more" / "year=2026" / "part-0.csv")
    assert sorted(first) == sorted([str(data / "own.csv"), through_link])
    assert first[through_link].endswith(f":->{linked}@{linked.stat().st_ino}")

    _rewrite_same_size(linked, "a\n3\n")
    assert key_changes({"data": first}, {"data": _identity(data)}) == [f"input data changed: {through_link} modified"]


def test_retargeting_a_symlink_to_a_file_of_the_same_size_and_time_changes_the_identity(tmp_path: Path) -> None:
    data, versions = tmp_path / "data", tmp_path / "versions"
    old = _write(versions / "v1.csv", "a\n1\n")
    new = _write(versions / "v2.csv", "a\n2\n")
    os.utime(new, ns=(old.stat().st_atime_ns, old.stat().st_mtime_ns))
    data.mkdir()
    (data / "current.csv").symlink_to(old)
    (data / "day").symlink_to(versions, target_is_directory=True)
    first = _identity(data)

    (data / "current.csv").unlink()
    (data / "current.csv").symlink_to(new)
    second = _identity(data)
    assert key_changes({"data": first}, {"data": second}) == [f"input data changed: {data / 'current.csv'} modified"]
    assert data_identity([str(data / "current.csv")], data)[0] == {
        str(data / "current.csv"): second[str(data / "current.csv")]
    }

    swapped = tmp_path / "swapped"  # the same names, sizes and times behind a retargeted folder link
    _write(swapped / "v1.csv", "b\n1\n")
    _write(swapped / "v2.csv", "b\n2\n")
    for name in ("v1.csv", "v2.csv"):
        stat = (versions / name).stat()
        os.utime(swapped / name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (data / "day").unlink()
    (data / "day").symlink_to(swapped, target_is_directory=True)
    assert sorted(key_changes({"data": second}, {"data": _identity(data)})) == [
        f"input data changed: {data / 'day' / 'v1.csv'} modified",
        f"input data changed: {data / 'day' / 'v2.csv'} modified",
    ]


def test_a_store_listing_skips_hidden_folders_at_any_depth_and_keeps_partition_folders() -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    root = "/dagspec-identity-test"
    for name in ("_day=1/part-0.csv", "k=2/part-0.csv", "_SUCCESS", ".staging/part-8.csv", "_temporary/0/part-9.csv"):
        fs.pipe(f"{root}/{name}", b"a\n1\n")
    try:
        listed = [info.path for info in storage.list_files(f"memory://{root}")]
    finally:
        fs.rm(root, recursive=True)
    assert listed == [f"memory://{root}/_day=1/part-0.csv", f"memory://{root}/k=2/part-0.csv"]


@pytest.mark.spark
def test_the_identity_lists_the_files_spark_reads(spark, tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    for name in ("_day=1/a.csv", "_day=2/b.csv", "_day=2/_SUCCESS", "_day=2/.b.csv.crc", "_day=2/c.csv._COPYING_"):
        _write(data / name, "1\n")
    _write(data / "_SUCCESS", "")
    _write(data / "_temporary" / "0" / "_day=9" / "t.csv", "9\n")
    _write(data / ".staging" / "_day=8" / "s.csv", "8\n")
    _write(data / ".staging" / "s.csv", "7\n")
    _write(elsewhere / "d.csv", "3\n")
    (data / "_day=3").symlink_to(elsewhere, target_is_directory=True)

    table = spark.read.csv(str(data))
    assert sorted(f.removeprefix("file://") for f in table.inputFiles()) == sorted(_identity(data))
    assert len(table.inputFiles()) == 3 and "_day" in table.columns  # partition discovery

    # a glob: Hadoop's * matches dot and underscore folders, whose files are then read
    pattern = f"{data}/*/*.csv"
    globbed = sorted(f.removeprefix("file://") for f in spark.read.text(pattern).inputFiles())
    assert globbed == sorted(data_identity([pattern], data)[0])
    assert str(data / ".staging" / "s.csv") in globbed


@pytest.mark.spark
def test_a_file_added_to_an_underscore_partition_reruns_the_read_stage(spark, home, tmp_path: Path) -> None:
    data = tmp_path / "data"
    spark.createDataFrame([(1,), (2,)], "x int").write.parquet(str(data / "_src=a"))
    spark.createDataFrame([(3,)], "x int").write.parquet(str(data / "_src=b"))
    spec = load_spec(
        write_spec(tmp_path / "p", f'stages:\n  raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}\n')
    )
    first = run_pipeline_in_process(spark, spec)["raw"]
    assert manifest(first)["rows"] == {"data": 3} and "_src" in manifest(first)["outputs"]["data"]["schema"]

    spark.createDataFrame([(4,), (5,)], "x int").coalesce(1).write.mode("append").parquet(str(data / "_src=b"))
    second = run_pipeline_in_process(spark, spec)["raw"]
    assert second.fingerprint != first.fingerprint
    added = [c for c in key_changes(first.key, second.key) if c.endswith(" added")]
    assert len(added) == 1 and "/_src=b/part-" in added[0]
    assert manifest(second)["rows"] == {"data": 5}
