"""bench/scale.py keeps working: its specs validate, and its smallest run measures every stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench import scale
from bench.scale_curves import curves
from bench.scale_probe import ProcessSampler
from bench.scale_projection import projection
from bench.scale_report import report, slope
from dagspec.spec.loader import load_spec
from tests.conftest import REPO


def _write(spec: dict[str, object], folder: Path) -> Path:
    path = folder / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_the_ctr_copy_keeps_only_the_chosen_engines_and_what_they_read(tmp_path: Path) -> None:
    spec = load_spec(_write(scale.bench_spec("ctr", ["xgb_single"], with_model=False), tmp_path))
    names = {name.split("__")[0] for name in spec.stages}  # matrix stages: sample__10000, ...
    assert {"logs", "sample", "hashed", "hashed_test", "xgb_single", "eval_xgb_single", "report"} <= names
    # the other engines, the as_is features only RF reads, and the gate on the 100,000-row point are gone
    assert not names & {"xgb_spark", "lr", "rf", "eval_rf", "as_is", "as_is_test", "best_gate"}
    assert {role.split("__")[0] for role in spec.stages["report"].inputs} == {"xgb_single"}


def test_the_physics_copy_is_the_data_stages_and_optionally_the_hlf_model(tmp_path: Path) -> None:
    data = load_spec(_write(scale.bench_spec("physics", [], with_model=False), tmp_path))
    assert set(data.stages) == set(scale.PHYSICS_DATA)
    model = scale.bench_spec("physics", [], with_model=True)
    assert set(model["stages"]) == {*scale.PHYSICS_DATA, "hlf_classifier"}


def test_generated_days_hold_the_train_size_and_a_test_day() -> None:
    args = type("Args", (), {"pipeline": "ctr", "size": 10_000_000, "test_rows": 1_000_000})()
    args.engines, args.xgb_rounds, args.rf_trees, args.sizes = ["xgb_single"], 200, 160, None
    params = scale.run_params(args)
    day = params["gen_rows"] // params["gen_days"]
    assert day >= 1_000_000 and day * (params["gen_days"] - 1) >= 10_000_000
    assert params["sizes"] == [10_000_000]
    # --sizes adds learning-curve points to the same run; the days still hold the largest
    args.sizes = [100_000, 10_000, 10_000_000]
    assert scale.run_params(args)["sizes"] == [10_000, 100_000, 10_000_000]


def test_slope_is_taken_between_the_two_largest_sizes() -> None:
    assert slope([(1e4, 50.0), (1e5, 1.0), (1e6, 10.0)]) == pytest.approx(1.0)
    assert slope([(1e6, 10.0), (1e6, 12.0)]) is None  # rows did not change (the test side)


def test_rows_of_other_masters_make_a_cores_table_and_stay_out_of_the_size_tables(tmp_path: Path) -> None:
    def row(master: str, stage_s: float, stage: str = "hashed") -> dict[str, object]:
        return {"pipeline": "ctr", "size": 10**6, "task": stage, "stage": stage, "master": master,
                "state": "ran", "stage_s": stage_s, "cpu_s": 2 * stage_s, "rows": 10**6,
                "mode": "spark" if master.startswith("spark") else "connect"}  # fmt: skip

    rows = tmp_path / "rows.jsonl"
    masters = [("local[*]", 10.0), ("local[1]", 19.0), ("spark://127.0.0.1:7077", 12.0)]
    lines = [row(m, s) for m, s in masters] + [row(m, s / 2, "lr") for m, s in masters]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    text = report([rows], tmp_path / "plots")
    cores, per_stage = text.split("### ctr: per stage")
    assert "| hashed | 1,000,000 | 127.0.0.1:7077" not in cores  # one row per stage, a column per master
    # fewest cores first; speed-ups against it
    assert "| hashed | 1,000,000 | 19.0 / 38.0 | 10.0 / 20.0 (1.90x) | 12.0 / 24.0 (1.58x) |" in cores
    assert "| lr | 1,000,000 | 9.5 / 19.0 | 5.0 / 10.0 (1.90x) | 6.0 / 12.0 (1.58x) |" in cores
    assert "| **all stages** | | 28.5 | 15.0 (1.90x) | 18.0 (1.58x) |" in cores
    assert "local[1]: stage s / CPU s" in cores and "cluster 127.0.0.1:7077 (spark-submit)" in cores
    assert (tmp_path / "plots" / "ctr_1000000_time_vs_cores.png").stat().st_size > 0
    assert per_stage.count("| hashed |") == 1 and "| 10.0 |" in per_stage  # only local[*] in the size table


def test_the_projection_scales_the_train_side_keeps_the_test_side_and_leaves_out_the_generator(
    tmp_path: Path,
) -> None:
    base = {"pipeline": "ctr", "master": "local[*]", "state": "ran"}
    rows = [
        {**base, "size": 10**5, "task": "hashed", "stage": "hashed", "cpu_s": 50.0},  # a smaller size: not used
        {**base, "size": 10**6, "task": "hashed", "stage": "hashed", "cpu_s": 36.0},
        {**base, "size": 10**6, "task": "eval_lr", "stage": "eval_lr", "cpu_s": 7200.0},
        {**base, "size": 10**6, "task": "logs", "stage": "logs", "cpu_s": 9e9},
        {**base, "size": 10**6, "task": "xgb_single", "stage": "xgb_single", "cpu_s": 9e9},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    table = projection([path], "ctr", rows=1e9, cores=[10], efficiency=0.5)
    # hashed: 36 CPU s per 10^6 rows -> 36,000 s = 10 core-hours at 10^9; eval_lr: its 2 core-hours
    assert "| hashed | linear in the rows | 1,000,000 | 36.0 | 10.0 |" in table
    assert "| eval_lr | fixed: the 10^6-line test set | 1,000,000 | 7,200.0 | 2.00 |" in table
    assert "Total: **12.0 core-hours**." in table
    assert "| 10 | 2.40 |" in table  # 12 core-hours on 10 cores at half efficiency


def _run_with_report(folder: Path, rows: list[str]) -> Path:
    table = folder / "storage" / "criteo_ctr" / "report" / "abc" / "report" / "metrics.tsv"
    table.parent.mkdir(parents=True)
    header = "Engine\tTrain size\tROC AUC\tLog loss\tTrain time\tMaximum memory\tCPU load"
    table.write_text("\n".join([header, *rows]) + "\n")
    return folder


def test_the_runs_report_tables_merge_into_one_learning_curve_beside_the_published_one(tmp_path: Path) -> None:
    small = _run_with_report(tmp_path / "ctr-10000", ["xgb_single\t10000\t0.77\t0.126\t13.6\t370.3\t1.6"])
    big = _run_with_report(
        tmp_path / "ctr-1000000",
        ["lr\t1000000\t0.81\t0.112\t49.3\t2155.4\t1.8", "xgb_single\t1000000\t0.833\t0.108\t85.6\t2588.6\t1.9"],
    )
    table = curves([big, small], tmp_path / "plots")
    drawn = json.loads((tmp_path / "plots" / "curves.json").read_text())
    assert drawn["ROC AUC"]["xgb_single"] == [[10000, 0.77], [1000000, 0.833]]
    assert drawn["ROC AUC"]["lr"] == [[1000000, 0.81]]
    published = sorted(name for name in drawn["ROC AUC"] if "published" in name)
    assert [name.split(" (")[0] for name in published] == ["Spark ML LR", "XGBoost"]  # the run's engines' only
    assert drawn["ROC AUC"][published[1]][-1] == [10000000, 0.7507]
    assert {p.name for p in (tmp_path / "plots").glob("*.png")} == {
        "auc.png",
        "log_loss.png",
        "train_time.png",
        "memory.png",
    }
    assert "| xgb_single | 1,000,000 | 0.8330 | 0.1080 | 85.6 | 2588.6 | 1.9 |" in table.splitlines()


def test_the_report_stages_intervals_become_the_merged_curves_error_bars(tmp_path: Path) -> None:
    run = _run_with_report(tmp_path / "ctr-1000000", ["xgb_single\t1000000\t0.833\t0.108\t85.6\t2588.6\t1.9"])
    (next(run.glob("storage/*/report/*/report")) / "curves.json").write_text(
        json.dumps({"ROC AUC interval": {"xgb_single": [[1000000, 0.829, 0.837]]}})
    )
    curves([run], tmp_path / "plots")
    drawn = json.loads((tmp_path / "plots" / "curves.json").read_text())
    assert drawn["ROC AUC interval"] == {"xgb_single": [[1000000, 0.829, 0.837]]}
    assert "Log loss interval" not in drawn  # none in the run's table: no bars invented


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_smallest_physics_run_measures_every_stage(tmp_path: Path, airflow_home: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k == "DAGSPEC_CONNECT_PORT"
    }
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home))
    out = tmp_path / "rows.jsonl"
    argv = [sys.executable, str(REPO / "bench" / "scale.py"), "run", "physics", "--size", "200", "--reuse-env"]
    done = subprocess.run(
        [*argv, "--work", str(tmp_path / "run"), "--out", str(out)], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["task"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows["_run"]["state"] == "success" and rows["_run"]["peak_rss_mb"]["connect_server"] > 0
    for stage in scale.PHYSICS_DATA:
        row = rows[stage]
        assert row["state"] == "ran" and row["stage_s"] > 0 and row["cpu_s"] > 0, row
        assert row["rows"] > 0 and row["client_peak_rss_mb_manifest"] > 0, row
    assert rows["events"]["rows"] == 200
    shown = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "report", str(out), "--plots", str(tmp_path / "plots")],
        env=env, cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "| features | 200 | ran |" in shown.stdout
    assert (tmp_path / "plots" / "physics_time.png").stat().st_size > 0


@pytest.mark.parametrize("mode", ["connect", "spark"])
def test_the_runs_environment_sends_every_stage_to_the_master_in_spark_mode(tmp_path: Path, mode: str) -> None:
    master = "spark://127.0.0.1:7077"
    args = type("Args", (), {"reuse_env": False, "home": tmp_path / "home", "master": master, "mode": mode})()
    env = scale.environment(args, tmp_path / "work")
    assert env["DAGSPEC_CONNECT_MASTER"] == master  # the local server's (and own-driver stages') master
    if mode == "spark":
        assert env["DAGSPEC_MODE"] == "spark"
        assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {"conn_type": "spark", "host": master}
    else:
        assert "DAGSPEC_MODE" not in env and "AIRFLOW_CONN_SPARK_DEFAULT" not in env


def test_a_window_shorter_than_the_sampling_interval_still_counts_its_cpu() -> None:
    server, client, later = (1, 1), (2, 1), (3, 1)  # (pid, start ticks)
    sampler = ProcessSampler(roots=set, samples=[
        (10.0, {server: ("connect_server", 100, 100, 5.0), client: ("client", 50, 50, 1.0)}),
        (10.5, {server: ("connect_server", 100, 100, 5.75), client: ("client", 60, 60, 1.25),
                later: ("client", 10, 10, 0.5)}),
    ])  # fmt: skip
    window = sampler.window(10.1, 10.4)  # no sample inside: from the one before to the one after
    assert window["cpu_s_by_role"] == {"client": 0.25, "connect_server": 0.75}
    # seen first inside the window, a process counts all its CPU; one born after the window none
    assert sampler.window(9.0, 10.2)["cpu_s_by_role"] == {"client": 1.25, "connect_server": 5.75}
