"""Single-node XGBoost: dagspec's ``train_xgboost`` (workers: 1) against plain ``xgboost.train`` on the same rows.

    .venv/bin/python bench/xgb_vs_plain.py --rows 100000 --features hashed as_is --rounds 200 --repeats 3

One ``local[2]`` session; generated Criteo logs of two equal days (``generate_criteo_logs``, seed 7):
the first day is the train set, the second the test set, both turned into features by ``ctr_features``
(``hashed`` with ``--hash-bits`` and ``log1p``, as pipelines/criteo_ctr.yaml trains XGBoost; ``as_is``:
the 39 columns as numbers). Then per repeat (seed = repeat) and feature set:

- **dagspec**: ``run_stage`` of a ``train_xgboost`` stage (``workers: 1``, ``--nthread``, the kind's
  defaults = the benchmark's params, ``--rounds``): the stage's own time (manifest ``duration_s``), its
  fit (model.json ``train_time_s``: reading the Parquet shards, the QuantileDMatrix, training), and the
  CPU seconds of this process across ``run_stage`` (xgboost's threads included; the Spark JVM's
  few checks not);
- **plain**: the same Parquet files read by pyarrow into a scipy CSR (hashed; absent = missing, as the
  stage does) or a float32 matrix (as_is; NaN = missing), ``xgboost.DMatrix`` and ``xgboost.train``
  with the same params, nthread and seed, no eval set: wall and CPU seconds from the read to the booster.

``--from-run STORAGE`` instead compares a finished ``scale.py run ctr`` (its pipeline storage,
``<run>/storage/criteo_ctr``) at each train size it has: the committed ``xgb_single__<size>``
booster against plain ``xgboost.train`` with that model card's params on the very Parquet rows it
was trained on (``hashed__<size>``), both scored on the run's ``hashed_test``; one repeat (the
run's seed):

    .venv/bin/python bench/xgb_vs_plain.py --from-run /tmp/scale/home/runs/ctr-.../storage/criteo_ctr --out ...

Both boosters are scored on the test day (sklearn ROC AUC). The ratio columns are dagspec over plain.
CPU seconds include OpenMP's spin-waiting, which on a loaded machine can cost more than the work
(measured: 9x on 39 columns at load 15); run with ``OMP_WAIT_POLICY=PASSIVE`` there (both sides
get it; the results record it and the load averages).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from local_spark import local_session

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SPEC = """
stages:
  logs: {{kind: generate_criteo_logs, params: {{rows: {logs_rows}, days: 2, seed: 7}}}}
  train_days: {{kind: read_criteo, inputs: {{logs: logs}}, params: {{days: all_but_last}}}}
  test_day: {{kind: read_criteo, inputs: {{logs: logs}}, params: {{days: last}}}}
  train_hashed: {{kind: ctr_features, inputs: {{data: train_days}}, params: {{mode: hashed, hash_bits: {bits}, log1p: true}}}}
  test_hashed: {{kind: ctr_features, inputs: {{data: test_day}}, params: {{mode: hashed, hash_bits: {bits}, log1p: true}}}}
  train_as_is: {{kind: ctr_features, inputs: {{data: train_days}}, params: {{mode: as_is}}}}
  test_as_is: {{kind: ctr_features, inputs: {{data: test_day}}, params: {{mode: as_is}}}}
  xgb_hashed: {{kind: train_xgboost, inputs: {{train: train_hashed}}, params: {{workers: 1, nthread: {nthread}, num_round: {rounds}, seed: "{{{{ params.rep }}}}"}}}}
  xgb_as_is: {{kind: train_xgboost, inputs: {{train: train_as_is}}, params: {{workers: 1, nthread: {nthread}, num_round: {rounds}, seed: "{{{{ params.rep }}}}"}}}}
params:
  rep: {{type: integer, default: 0}}
"""


def _table(path: str) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(path.removeprefix("file://"), format="parquet").to_table()


def _matrix(path: str, features: str, n_features: int) -> tuple[Any, Any, float]:
    """(X, y, missing) of a committed features table, read by pyarrow: CSR (hashed) or float32 (as_is)."""
    import numpy as np

    from dagspec.kinds.training.xgboost_data import csr_from_vectors, dense_from_columns

    table = _table(path)
    y = table.column("label").to_numpy().astype(np.float32)
    if features == "hashed":
        return csr_from_vectors(table.column("features"), n_features), y, 0.0
    columns = [c for c in table.column_names if c != "label"]
    return dense_from_columns(table, columns), y, float("nan")


def _auc(y: Any, p: Any) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def _plain_against(
    ours: Any, params: dict[str, Any], train: str, features: str, n_features: int, test: Any, rounds: int
) -> dict[str, Any]:
    """Plain ``xgboost.train`` on the Parquet at ``train`` (read, DMatrix, train: wall and CPU s), then
    both boosters' ROC AUC on ``test`` = (X, y, missing)."""
    import xgboost as xgb

    x_test, y_test, missing = test
    cpu0, t0 = time.process_time(), time.perf_counter()
    x, y, _ = _matrix(train, features, n_features)
    plain = xgb.train(params, xgb.DMatrix(x, label=y, missing=missing), num_boost_round=rounds)
    plain_s, plain_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    dtest = xgb.DMatrix(x_test, missing=missing)
    return {
        "rows": len(y),
        "plain_s": plain_s,
        "plain_cpu_s": plain_cpu,
        "auc": _auc(y_test, ours.predict(dtest)),
        "plain_auc": _auc(y_test, plain.predict(dtest)),
        "loadavg": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="train rows (the test day has as many)")
    parser.add_argument("--features", nargs="+", choices=["hashed", "as_is"], default=["hashed", "as_is"])
    parser.add_argument("--hash-bits", type=int, default=17)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--nthread", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=None, help="scratch directory; committed data stages there are reused")
    parser.add_argument("--out", default=None, help="JSON results (default: WORK/xgb_vs_plain.json)")
    parser.add_argument("--from-run", type=Path, help="a scale run's pipeline storage: compare its xgb_single models")
    args = parser.parse_args()
    if args.from_run:
        results = compare_run(args.from_run, args.nthread)
        Path(args.out or "xgb_vs_plain_run.json").write_text(json.dumps(results, indent=2))
        print(run_table(results))
        return 0

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dagspec-bench-xgb-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSPEC_STORAGE_ROOT"] = str(work / "storage")
    results = compare(args, work)
    Path(args.out or work / "xgb_vs_plain.json").write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def compare(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Data stages once, then per repeat and feature set the stage and plain xgboost; raw runs + medians."""
    import xgboost as xgb

    from dagspec.job.runtime import run_stage
    from dagspec.kinds.model_card import read_model_card
    from dagspec.kinds.training.train_xgboost import TrainXGBoostParams
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    spec_path = work / "xgb_vs_plain.yaml"
    spec_path.write_text(
        SPEC.format(logs_rows=2 * args.rows, bits=args.hash_bits, rounds=args.rounds, nthread=args.nthread)
    )
    spec = load_spec(spec_path)
    spark = local_session()
    data = ["logs", "train_days", "test_day", *[f"{k}_{f}" for f in args.features for k in ("train", "test")]]
    for name in data:
        plan = resolve_pipeline(spec, default_context(spec, {"rep": 0}))  # keyed on what upstream committed
        if not plan[name].checkpoint.state().done:
            run_stage(spark, plan[name])
    plan = resolve_pipeline(spec, default_context(spec, {"rep": 0}))
    n_features = 2**args.hash_bits
    tests = {f: _matrix(plan[f"test_{f}"].output_path("data"), f, n_features) for f in args.features}
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        plan = resolve_pipeline(spec, default_context(spec, {"rep": rep}))
        for features in args.features:
            stage = plan[f"xgb_{features}"]
            cpu0 = time.process_time()
            manifest = run_stage(spark, stage).manifest
            stage_cpu = time.process_time() - cpu0
            model_dir = Path(stage.output_path("model").removeprefix("file://"))
            card = read_model_card(model_dir)
            ours = xgb.Booster(model_file=str(model_dir / card.artifact))
            params = {**TrainXGBoostParams(seed=rep).booster_params(), "nthread": args.nthread}
            train = plan[f"train_{features}"].output_path("data")
            run = {
                "rep": rep,
                "features": features,
                "num_features": card.features().num_features,
                "stage_s": manifest["duration_s"],
                "fit_s": card.train_time_s,
                "stage_cpu_s": stage_cpu,
                **_plain_against(ours, params, train, features, n_features, tests[features], args.rounds),
            }
            print(json.dumps(run), flush=True)
            runs.append(run)
    spark.stop()
    return {
        "rows": args.rows,
        "rounds": args.rounds,
        "nthread": args.nthread,
        "hash_bits": args.hash_bits,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "xgboost": xgb.__version__,
        "runs": runs,
        "medians": medians(runs),
    }


def compare_run(storage: Path, nthread: int) -> dict[str, Any]:
    """Per train size of a scale run: its committed xgb_single booster and plain xgboost on the same rows."""
    import xgboost as xgb

    from dagspec.checkpoint import latest
    from dagspec.kinds.model_card import read_model_card

    def committed(stage: str, output: str) -> str:
        found = latest(str(storage / stage))
        if found is None:
            raise SystemExit(f"{storage / stage}: no committed checkpoint")
        return f"{found.path}/{output}"

    sizes = sorted(int(d.name.split("__")[1]) for d in storage.glob("xgb_single__*"))
    test: Any = None
    runs = []
    for size in sizes:
        model_dir = Path(committed(f"xgb_single__{size}", "model").removeprefix("file://"))
        card = read_model_card(model_dir)
        n_features = card.features().num_features
        if test is None:
            test = _matrix(committed("hashed_test", "data"), "hashed", n_features)
        ours = xgb.Booster(model_file=str(model_dir / card.artifact))
        params = {k: v for k, v in card.params.items() if k not in ("num_round", "workers")}
        params["nthread"] = nthread
        train = committed(f"hashed__{size}", "data")
        run = {
            "size": size,
            "test_rows": len(test[1]),
            "rounds": card.rounds,
            "fit_s": card.train_time_s,
            "peak_memory_mb": card.peak_memory_mb,
            **_plain_against(ours, params, train, "hashed", n_features, test, card.rounds or 0),
        }
        print(json.dumps(run), flush=True)
        runs.append(run)
    return {"storage": str(storage), "nthread": nthread, "xgboost": xgb.__version__, "runs": runs}


def run_table(results: dict[str, Any]) -> str:
    """A Markdown table of a scale run's sizes: AUC of its booster and of plain xgboost, fit times."""
    lines = [
        "| train rows | dagspec AUC | plain AUC | difference | dagspec fit s | plain s | load |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["runs"]:
        lines.append(
            f"| {r['rows']:,} | {r['auc']:.4f} | {r['plain_auc']:.4f} | {r['auc'] - r['plain_auc']:+.4f} "
            f"| {r['fit_s']:.1f} | {r['plain_s']:.1f} | {r['loadavg']:.1f} |"
        )
    return "\n".join(lines)


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per feature set: the median of each measure and of the per-run ratios dagspec / plain."""
    out: dict[str, dict[str, float]] = {}
    for features in dict.fromkeys(r["features"] for r in runs):
        mine = [r for r in runs if r["features"] == features]
        keys = ("stage_s", "fit_s", "stage_cpu_s", "plain_s", "plain_cpu_s", "auc", "plain_auc")
        out[features] = {k: statistics.median(r[k] for r in mine) for k in keys}
        out[features]["fit_ratio"] = statistics.median(r["fit_s"] / r["plain_s"] for r in mine)
        out[features]["cpu_ratio"] = statistics.median(r["stage_cpu_s"] / r["plain_cpu_s"] for r in mine)
    return out


def table(results: dict[str, Any]) -> str:
    """A Markdown table of every run, then the medians."""
    head = (
        "| features | rep | stage s | fit s | stage CPU s | plain s | plain CPU s | fit / plain | CPU / plain "
        "| AUC | plain AUC | load |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in results["runs"]:
        lines.append(
            f"| {r['features']} | {r['rep']} | {r['stage_s']:.1f} | {r['fit_s']:.1f} | {r['stage_cpu_s']:.1f} "
            f"| {r['plain_s']:.1f} | {r['plain_cpu_s']:.1f} | {r['fit_s'] / r['plain_s']:.2f} "
            f"| {r['stage_cpu_s'] / r['plain_cpu_s']:.2f} | {r['auc']:.4f} | {r['plain_auc']:.4f} | {r['loadavg']:.1f} |"
        )
    for features, m in results["medians"].items():
        lines.append(
            f"| {features} | median | {m['stage_s']:.1f} | {m['fit_s']:.1f} | {m['stage_cpu_s']:.1f} "
            f"| {m['plain_s']:.1f} | {m['plain_cpu_s']:.1f} | {m['fit_ratio']:.2f} | {m['cpu_ratio']:.2f} "
            f"| {m['auc']:.4f} | {m['plain_auc']:.4f} | |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
