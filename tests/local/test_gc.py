"""`dagspec gc`: what no current spec reaches goes, with the bytes it freed; live leases are untouched."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

import pytest

from dagspec import storage
from dagspec.local.cli import main
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from tests.helpers import parquet_table, run_pipeline_in_process, write_spec


def load_and_plan(spec):
    return resolve_pipeline(spec, default_context(spec))["raw"]


pytestmark = pytest.mark.spark


def test_gc_removes_unreached_checkpoints_and_dead_leftovers(spark, home, tmp_path: Path, monkeypatch, capsys) -> None:
    data = parquet_table(spark, tmp_path, 30)
    path = write_spec(
        tmp_path / "pipelines",
        f"""
        params:
          n: {{type: integer, default: 5}}
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          few: {{kind: sample, inputs: {{data: raw}}, params: {{n: "{{{{ params.n }}}}"}}}}
        """,
    )
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(tmp_path / "pipelines"))
    spec = load_spec(path)
    current = run_pipeline_in_process(spark, spec)
    for n in (7, 8):
        run_pipeline_in_process(spark, spec, {"n": n})
    stage_dir = Path(current["few"].stage_dir)
    current["few"].checkpoint.point_latest()  # as if the defaults' run came last (gc keeps what _LATEST names)
    unreached = sorted(p.name for p in stage_dir.iterdir() if p.name not in (current["few"].fingerprint, "_LATEST"))
    assert len(unreached) == 2
    leased, dead = unreached
    (stage_dir / f"_lease-{leased}").write_text(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "attempt": "live", "heartbeat": time.time()})
    )
    (stage_dir / f"_tmp-{dead}-0123abcd" / "data").mkdir(parents=True)
    (stage_dir / f"_tmp-{dead}-0123abcd" / "data" / "part-0").write_text("x" * 1000)
    (stage_dir / f"_scratch-{current['few'].fingerprint}").mkdir()  # its checkpoint is committed: an orphan

    assert main(["gc", "--keep", "0", "--dry-run"]) == 0
    dry = capsys.readouterr().out
    expected = {
        str(stage_dir / dead): "not reached by any spec",
        str(stage_dir / f"_tmp-{dead}-0123abcd"): "the temporary folder of a dead attempt",
        str(stage_dir / f"_scratch-{current['few'].fingerprint}"): "the scratch folder of a committed checkpoint",
    }
    listed = dict(re.findall(r"would remove (\S+) \(\d+ bytes\): (.+)", dry))
    assert listed == expected
    sizes = {p: storage.size_of(p) for p in expected}
    assert f"would free {sum(sizes.values())} bytes" in dry
    assert all(Path(p).exists() for p in expected)

    assert main(["gc", "--keep", "0"]) == 0
    out = capsys.readouterr().out
    assert f"freed {sum(sizes.values())} bytes" in out
    assert not any(Path(p).exists() for p in expected)
    assert (stage_dir / leased).is_dir()  # under a live lease
    assert all(Path(s.checkpoint_dir, "_SUCCESS").exists() for s in current.values())


def test_gc_keeps_an_invalid_specs_checkpoints_and_a_provisional_stages(
    spark, home, tmp_path: Path, monkeypatch, capsys
) -> None:
    data = parquet_table(spark, tmp_path, 30)
    pipelines = tmp_path / "pipelines"
    body = f"""
        stages:
          raw: {{kind: read, params: {{format: parquet, path: "{data}"}}}}
          few: {{kind: sample, inputs: {{data: raw}}, params: {{n: 5}}}}
        """
    good = load_spec(write_spec(pipelines, body, name="good.yaml"))
    broken = load_spec(write_spec(pipelines, body, name="broken.yaml"))
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(pipelines))
    kept = run_pipeline_in_process(spark, good)
    other = run_pipeline_in_process(spark, broken)
    (pipelines / "broken.yaml").write_text("stages: {raw: {kind: nope}}\n")  # being edited: invalid now
    storage.delete(kept["raw"].checkpoint_dir)  # raw must run again: few's fingerprint is provisional

    assert main(["gc", "--keep", "0"]) == 0
    out = capsys.readouterr().out
    assert "broken.yaml: invalid (its checkpoints are kept)" in out
    assert all(Path(s.checkpoint_dir, "_SUCCESS").exists() for s in other.values())
    assert Path(kept["few"].checkpoint_dir, "_SUCCESS").exists()  # reused if raw gives the same bytes again


def test_gc_collects_per_partition_and_a_deleted_days_checkpoints(
    spark, home, tmp_path: Path, monkeypatch, capsys
) -> None:
    days = tmp_path / "days"
    days.mkdir()
    for day, rows in (("1", 3), ("2", 4)):
        (days / f"day_{day}.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(rows)))
    path = write_spec(
        tmp_path / "pipelines",
        f"""
        partitions: {{files: "{days}/day_{{day}}.csv"}}
        stages:
          raw: {{kind: read, partitioned: true, params: {{format: csv, header: true, path: "{{{{ partition.path }}}}"}}}}
        """,
    )
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(tmp_path / "pipelines"))
    spec = load_spec(path)
    first = run_pipeline_in_process(spark, spec)["raw"].partitions
    (days / "day_1.csv").write_text("x\n7\n8\n")  # day 1 rewritten: its first checkpoint is unreached
    second = run_pipeline_in_process(spark, spec)["raw"].partitions
    (days / "day_2.csv").unlink()  # day 2 deleted: its partition is no longer listed
    assert main(["gc", "--keep", "0"]) == 0
    out = capsys.readouterr().out
    assert f"_partitions/1/{first['1'].fingerprint} " in out and f"_partitions/2/{first['2'].fingerprint} " in out
    assert not Path(first["1"].checkpoint_dir).exists() and not Path(first["2"].checkpoint_dir).exists()
    assert Path(second["1"].checkpoint_dir, "_SUCCESS").exists()  # what the spec reaches now stays
    # gc emptied the deleted day's folder: show no longer reports it as deleted
    assert "deleted" not in " ".join(stage_status(load_and_plan(spec)).reasons)
