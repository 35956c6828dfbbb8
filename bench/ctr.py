"""CTR benchmark: dagspec's training kinds against the plain libraries on the same data.

    .venv/bin/python bench/ctr.py --train-rows 1000000 --test-rows 100000 --repeats 3

One run, one local[2] session, generated Criteo logs (``generate_criteo_logs``; the last day is
the test set). Side by side on the same features:

- XGBoost on the as_is columns: ``train_xgboost`` workers=1 (Parquet -> QuantileDMatrix),
  workers=2 (xgboost.spark), and plain ``xgboost.train`` (hist, nthread 2) on a pandas frame
  already in memory;
- logistic regression on the hashed features: ``train_spark_ml`` LR and sklearn
  ``LogisticRegression`` (lbfgs) on the same sparse matrix.

Times are the kinds' ``train_time_s`` (model.json: the fit including loading the data) and the
plain libraries' fit time (data already in memory, so the ratio is conservative). AUC and log
loss are computed by sklearn on the same test rows for every model. Medians over ``--repeats``.
``--memory-sizes`` also runs the Spark-mode stages under spark-submit at those train sizes and
reads the driver's peak RSS from the manifest.

The fit-vs-fit ratio leaves out what a stage costs around its fit. ``--airflow`` (on by default)
therefore runs the same stages through ``dagspec run`` (real ``airflow dags test``, each stage in
its real execution mode; see ``bench/ctr_airflow.py``) and prints each task's wall time as Airflow
records it beside the fit, the difference, and the wall time over the plain library's fit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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
  logs: {{kind: generate_criteo_logs, params: {{rows: {rows}, days: {days}, seed: 7}}}}
  train_days: {{kind: read_criteo, inputs: {{logs: logs}}, params: {{days: all_but_last}}}}
  test_day: {{kind: read_criteo, inputs: {{logs: logs}}, params: {{days: last}}}}
  train_as_is: {{kind: ctr_features, inputs: {{data: train_days}}, params: {{mode: as_is}}}}
  test_as_is: {{kind: ctr_features, inputs: {{data: test_day}}, params: {{mode: as_is}}}}
  train_hashed: {{kind: ctr_features, inputs: {{data: train_days}}, params: {{mode: hashed, hash_bits: {bits}, log1p: true}}}}
  test_hashed: {{kind: ctr_features, inputs: {{data: test_day}}, params: {{mode: hashed, hash_bits: {bits}, log1p: true}}}}
  xgb_single: {{kind: train_xgboost, inputs: {{train: train_as_is}}, params: {{workers: 1, nthread: 2, num_round: {rounds}, seed: "{{{{ params.rep }}}}"}}}}
  xgb_spark: {{kind: train_xgboost, inputs: {{train: train_as_is}}, params: {{workers: 2, num_round: {rounds}, seed: "{{{{ params.rep }}}}"}}}}
  lr: {{kind: train_spark_ml, inputs: {{train: train_hashed}}, params: {{model: logistic_regression, max_iter: 100, seed: "{{{{ params.rep }}}}"}}}}
params:
  rep: {{type: integer, default: 0}}
"""


STAGE_FAMILY = {"xgb_single": "xgboost", "xgb_spark": "xgboost", "lr": "lr"}


def _metrics(y: Any, p: Any) -> dict[str, float]:
    from sklearn.metrics import log_loss, roc_auc_score

    return {"auc": float(roc_auc_score(y, p)), "logloss": float(log_loss(y, p.clip(1e-15, 1 - 1e-15)))}


def _parquet(path: str) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(path.removeprefix("file://"), format="parquet").to_table()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--hash-bits", type=int, default=17)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-sizes", type=int, nargs="*", default=[])
    parser.add_argument(
        "--memory-rounds",
        type=int,
        default=20,
        help="boosting rounds of the memory runs (memory does not grow with rounds)",
    )
    parser.add_argument("--skip-comparison", action="store_true", help="skip the in-process comparison")
    parser.add_argument(
        "--airflow",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the stages through `dagspec run` (Airflow task wall vs fit; default on)",
    )
    parser.add_argument(
        "--families", nargs="+", choices=["xgboost", "lr"], default=["xgboost", "lr"], help="which comparisons to run"
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "ctr_last.json"))
    parser.add_argument(
        "--work",
        default=None,
        help="scratch directory; data stages already committed there are reused (default: a new one)",
    )
    args = parser.parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dagspec-bench-ctr-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSPEC_STORAGE_ROOT"] = str(work / "storage")
    results: dict[str, Any] = {} if args.skip_comparison else _compare(args, work)
    if args.airflow:
        results["airflow"] = _airflow(args, work, results.get("summary", {}))

    if args.memory_sizes:
        results["driver_peak_rss_mb"] = _memory_runs(args, work)
    Path(args.out).write_text(json.dumps(results, indent=2))
    if "summary" in results:
        print(json.dumps(results["summary"], indent=2))
    if "driver_peak_rss_mb" in results:
        print(json.dumps(results["driver_peak_rss_mb"], indent=2))
    if "airflow" in results:
        print(results["airflow"]["table"])
    return 0


def _spec_text(args: argparse.Namespace) -> str:
    days = max(2, round(args.train_rows / args.test_rows) + 1)  # equal days; the last one is the test set
    return SPEC.format(rows=args.test_rows * days, days=days, bits=args.hash_bits, rounds=args.rounds)


def _airflow(args: argparse.Namespace, work: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """The same stages through ``dagspec run``: Airflow task wall vs fit vs the plain libraries' fit."""
    from ctr_airflow import TRAIN_STAGES, airflow_runs, summarize, table

    spec = _spec_text(args)
    for name in TRAIN_STAGES:  # the families left out are left out of the DAG too
        if STAGE_FAMILY[name] not in args.families:
            spec = "\n".join(line for line in spec.splitlines() if not line.startswith(f"  {name}:"))
    runs = airflow_runs(spec, work / "airflow-home", args.repeats)
    plain = {name: summary[name]["train_time_s"] for name in ("plain_xgboost", "sklearn_lr") if name in summary}
    rows = summarize(runs, plain)
    return {"runs": runs, "plain_fit_s": plain, "summary": rows, "table": table(rows, plain)}


def _compare(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The side-by-side runs at --train-rows / --test-rows; returns the raw runs and the summary."""
    import numpy as np
    import xgboost as xgb
    from sklearn.linear_model import LogisticRegression

    from dagspec.job.runtime import run_stage
    from dagspec.kinds.scoring.models import read_card, transform_with_model
    from dagspec.kinds.training.train_spark_ml import TrainSparkMLParams
    from dagspec.kinds.training.xgboost_data import csr_from_vectors
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    spec_path = work / "ctr_bench.yaml"
    spec_path.write_text(_spec_text(args))
    spec = load_spec(spec_path)
    spark = local_session()
    results: dict[str, Any] = {"train_rows": None, "test_rows": None, "rounds": args.rounds, "runs": []}
    plain_params = {
        "objective": "binary:logistic", "eval_metric": "logloss", "booster": "gbtree", "max_depth": 7, "eta": 0.2,
        "gamma": 0.4, "subsample": 0.8, "colsample_bytree": 0.8, "min_child_weight": 20, "alpha": 3,
        "lambda": 100, "tree_method": "hist", "max_bin": 256, "nthread": 2,
    }  # fmt: skip
    for name in ("logs", "train_days", "test_day", "train_as_is", "test_as_is", "train_hashed", "test_hashed"):
        # resolved stage by stage, as each Airflow task does: a key holds its upstream's committed content
        data_plan = resolve_pipeline(spec, default_context(spec, {"rep": 0}))
        if data_plan[name].checkpoint.state().done:  # committed before: reuse
            print(f"{name}: reused", flush=True)
            continue
        t0 = time.perf_counter()
        run_stage(spark, data_plan[name])
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    data_plan = resolve_pipeline(spec, default_context(spec, {"rep": 0}))
    train_as_is = _parquet(data_plan["train_as_is"].output_path("data")).to_pandas()
    test_as_is = _parquet(data_plan["test_as_is"].output_path("data")).to_pandas()
    results["train_rows"], results["test_rows"] = len(train_as_is), len(test_as_is)
    feature_cols = [c for c in train_as_is.columns if c != "label"]
    y_test = test_as_is["label"].to_numpy()
    x_test = test_as_is[feature_cols]
    train_h = _parquet(data_plan["train_hashed"].output_path("data"))
    test_h = _parquet(data_plan["test_hashed"].output_path("data"))
    n_features = 2**args.hash_bits
    xh_train, yh_train = csr_from_vectors(train_h.column("features"), n_features), train_h.column("label").to_numpy()
    xh_test = csr_from_vectors(test_h.column("features"), n_features)

    stage_names = [n for n, family in STAGE_FAMILY.items() if family in args.families]
    # the same objective: Spark's regParam is lambda on the mean loss, sklearn's C = 1 / (n lambda)
    sklearn_c = 1 / (len(yh_train) * TrainSparkMLParams(model="logistic_regression").reg_param)
    for rep in range(args.repeats):
        run: dict[str, Any] = {"rep": rep}
        plan = resolve_pipeline(spec, default_context(spec, {"rep": rep}))
        for name in stage_names:
            t0 = time.perf_counter()
            manifest = run_stage(spark, plan[name]).manifest
            model_dir = plan[name].output_path("model")
            card = read_card(model_dir)
            test_name = "test_hashed" if name == "lr" else "test_as_is"
            scored = transform_with_model(
                spark, model_dir, spark.read.parquet(plan[test_name].output_path("data")), ["label"]
            )
            pdf = scored.select("label", "probability").toPandas()  # bench only: 100k rows
            p = np.array([v[1] for v in pdf["probability"]])
            run[name] = {
                "train_time_s": card.train_time_s,
                "stage_s": manifest["duration_s"] if "duration_s" in manifest else time.perf_counter() - t0,
                "peak_memory_mb": card.peak_memory_mb,
                "cpu_load": card.cpu_load,
                **_metrics(pdf["label"].to_numpy(), p),
            }
            print(name, run[name], flush=True)
        if "xgboost" in args.families:
            t0 = time.perf_counter()
            dtrain = xgb.DMatrix(train_as_is[feature_cols], label=train_as_is["label"])
            booster = xgb.train({**plain_params, "seed": rep}, dtrain, num_boost_round=args.rounds)
            run["plain_xgboost"] = {
                "train_time_s": time.perf_counter() - t0,
                **_metrics(y_test, booster.predict(xgb.DMatrix(x_test))),
            }
            print("plain_xgboost", run["plain_xgboost"], flush=True)
        if "lr" in args.families:
            t0 = time.perf_counter()
            sk = LogisticRegression(max_iter=100, C=sklearn_c, solver="lbfgs").fit(xh_train, yh_train)
            run["sklearn_lr"] = {
                "train_time_s": time.perf_counter() - t0,
                "C": sklearn_c,
                **_metrics(y_test, sk.predict_proba(xh_test)[:, 1]),
            }
            print("sklearn_lr", run["sklearn_lr"], flush=True)
        results["runs"].append(run)

    def median(engine: str, key: str) -> float:
        return statistics.median(r[engine][key] for r in results["runs"])

    engines = [e for e in ("xgb_single", "xgb_spark", "plain_xgboost", "lr", "sklearn_lr") if e in results["runs"][0]]
    summary: dict[str, Any] = {e: {k: median(e, k) for k in ("train_time_s", "auc", "logloss")} for e in engines}
    pairs = [("xgb_single", "plain_xgboost"), ("xgb_spark", "plain_xgboost"), ("lr", "sklearn_lr")]
    summary["ratios"] = {}
    for ours, theirs in pairs:
        if ours in summary and theirs in summary:
            summary["ratios"][f"{ours} / {theirs} (median times)"] = (
                summary[ours]["train_time_s"] / summary[theirs]["train_time_s"]
            )
            paired = [r[ours]["train_time_s"] / r[theirs]["train_time_s"] for r in results["runs"]]
            summary["ratios"][f"{ours} / {theirs} (per run)"] = [round(x, 3) for x in paired]
            summary["ratios"][f"auc {ours} - {theirs}"] = summary[ours]["auc"] - summary[theirs]["auc"]
    results["summary"] = summary
    spark.stop()
    return results


def _memory_runs(args: argparse.Namespace, work: Path) -> dict[str, dict[str, float]]:
    """Driver peak RSS (manifest ``driver_peak_rss_mb``) of the training stages under spark-submit."""
    from dagspec.plan.resolve import default_context, resolve_pipeline
    from dagspec.spec.loader import load_spec

    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}", "PYSPARK_DRIVER_PYTHON": sys.executable}
    out: dict[str, dict[str, float]] = {}
    for size in args.memory_sizes:
        spec_path = work / f"mem_{size}.yaml"
        days = 2
        spec_path.write_text(SPEC.format(rows=size * days, days=days, bits=args.hash_bits, rounds=args.memory_rounds))
        spec = load_spec(spec_path)
        out[str(size)] = {}
        for name in list(resolve_pipeline(spec, default_context(spec, {"rep": 0}))):
            stage = resolve_pipeline(spec, default_context(spec, {"rep": 0}))[name]  # keyed on what upstream committed
            argv = [str(venv_bin / "spark-submit"), "--master", "local[2]", "--driver-memory", "4g",
                    str(REPO / "jobs" / "run_stage.py"), stage.to_json()]  # fmt: skip
            subprocess.run(argv, env=env, cwd=REPO, check=True, capture_output=True)
            if name in ("xgb_single", "xgb_spark", "lr"):
                manifest = json.loads((Path(stage.checkpoint_dir) / "manifest.json").read_text())
                out[str(size)][name] = manifest["driver_peak_rss_mb"]
                print(f"memory {size} {name}: {manifest['driver_peak_rss_mb']} MB", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
