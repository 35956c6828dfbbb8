"""How hard the generated Criteo logs are: xgb_single's (and VW's) learning curve on them, beside the published one.

    .venv/bin/python bench/generator_calibration.py --sizes 10000 30000 100000 --vw --out calib.json

One ``local[2]`` session. The logs come from the generator's own code path (``write_criteo_logs``:
day files of ``--test-rows`` lines each, enough days for the largest train size plus one), are read
back by ``read_criteo``'s parser (``parse_lines``) and turned into features by ``ctr_features``'s
functions, exactly as pipelines/criteo_ctr.yaml does: ``hashed`` (2^17 dims, log1p) for XGBoost,
``as_is`` for VW. The last day is the test set (``--test-rows`` lines); the train days are written
as one Parquet file each (row order fixed), and a train size n is their first n rows, so the
samples are nested; with ``--repeats`` a size is also trained on the next disjoint slices of n rows
where the pool has them (the spread of a size's points).

- **xgb_single**: ``train_xgboost``'s params (its defaults, the benchmark's tuned ones: depth 7,
  eta 0.2, gamma 0.4, subsample and colsample 0.8, min_child_weight 20, alpha 3, lambda 100, hist;
  200 rounds, nthread 2) on a ``QuantileDMatrix`` built as the stage builds it (``features_of``,
  absent entries missing);
- **vw** (``--vw``): ``train_vw``'s ``_train`` with its defaults (namespaces i with log1p and c,
  ``-b 22 -l 0.3``, one pass), scored with VW's own predictions (``-t``).

Printed beside the published curves on the real logs: ``results/metrics.tsv`` of the benchmark
(what the report draws, ``kinds/ctr/published.py``) and its older ``results/metrics.old.tsv`` (the
figures issue 41 quotes). ROC AUC and log loss by sklearn on the test day.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_spark import local_session

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# results/metrics.old.tsv of rambler-digital-solutions/criteo-1tb-benchmark (issue 41's table)
OLD_XGB_AUC = {10**4: 0.650, 3 * 10**4: 0.670, 10**5: 0.683, 3 * 10**5: 0.694, 10**6: 0.695, 3 * 10**6: 0.696}
OLD_XGB_LOG_LOSS = {10**4: 0.1472, 3 * 10**4: 0.1451, 10**5: 0.1442, 3 * 10**5: 0.14355, 10**6: 0.14335}
OLD_VW_AUC = {10**4: 0.609, 3 * 10**4: 0.632, 10**5: 0.653, 3 * 10**5: 0.679, 10**6: 0.692, 3 * 10**6: 0.707}


@dataclass(frozen=True)
class _Lines:
    """read_criteo's default line options (tab separated, no header, no id, hex categoricals)."""

    header: bool | None = False
    id_column: bool = False
    pad_short_rows: bool = False
    categoricals: str = "string"


def _published() -> dict[str, dict[str, dict[int, float]]]:
    from dagspec.kinds.ctr.published import CURVES

    return {c.engine: c.columns() for c in CURVES}


def write_tables(spark: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Generate the day files, parse them, write train/test Parquet of both feature modes."""
    from pyspark.sql import functions as F

    from dagspec.kinds.ctr.criteo_lines import parse_lines
    from dagspec.kinds.ctr.features import CtrFeaturesParams, as_is_features, hashed_features
    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    days = math.ceil(max(args.sizes) * args.repeats / args.test_rows) + 1
    t0 = time.perf_counter()
    stats = write_criteo_logs(
        spark, str(work / "logs"), days * args.test_rows, days, args.seed, _base_ctr(args), partitions_per_day=1
    )
    generate_s = time.perf_counter() - t0
    files = sorted(str(p) for p in (work / "logs").glob("day_*.tsv"))
    hashed = CtrFeaturesParams(mode="hashed", hash_bits=args.hash_bits, log1p=True)
    as_is = CtrFeaturesParams(mode="as_is")
    for part, chosen in (("train", files[:-1]), ("test", files[-1:])):
        parsed = parse_lines(spark, chosen, _Lines(), "\t")
        rows = parsed.where(F.col("_reason").isNull()).select("_row.*")
        hashed_features(rows, hashed).write.parquet(str(work / f"{part}_hashed"))
        if args.vw:
            as_is_features(rows, as_is).write.parquet(str(work / f"{part}_as_is"))
    return {
        "days": days,
        "rows": stats["rows"],
        "click_rate": stats["ctr"],
        "generate_s": generate_s,
        "ceiling": ceiling(spark, args),
    }


def ceiling(spark: Any, args: argparse.Namespace) -> dict[str, float]:
    """The Bayes limit: ROC AUC and log loss of the generator's own click probabilities on fresh lines."""
    import numpy as np

    from dagspec.kinds.ctr.logs_generator import calibrate_intercept, criteo_frame

    b0 = calibrate_intercept(spark, args.seed, _base_ctr(args))
    signal = criteo_frame(spark, args.test_rows, 1, args.seed + 1, 1).select("signal").toPandas()["signal"]
    p = 1 / (1 + np.exp(-(b0 + signal.to_numpy(dtype=float))))
    y = (np.random.default_rng(args.seed).random(len(p)) < p).astype(int)
    return _scores(y, p)


def _override(settings: list[str]) -> None:
    """``NAME=JSON`` -> the generator module's constant (dict keys that are digits become ints)."""
    from dagspec.kinds.ctr import logs_generator

    def keys(value: Any) -> Any:
        if isinstance(value, dict):
            return {int(k) if str(k).isdigit() else k: keys(v) for k, v in value.items()}
        return value

    for setting in settings:
        name, _, value = setting.partition("=")
        if not hasattr(logs_generator, name):
            raise SystemExit(f"--set: logs_generator has no constant {name!r}")
        setattr(logs_generator, name, keys(json.loads(value)))


def _base_ctr(args: argparse.Namespace) -> float:
    """``--base-ctr``, or the generator's default."""
    import inspect

    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    default = inspect.signature(write_criteo_logs).parameters["base_ctr"].default
    return float(args.base_ctr if args.base_ctr is not None else default)


def _table(path: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.read_table(sorted(str(p) for p in path.glob("*.parquet")))


def _scores(y: Any, p: Any) -> dict[str, float]:
    from sklearn.metrics import log_loss, roc_auc_score

    return {"roc_auc": float(roc_auc_score(y, p)), "log_loss": float(log_loss(y, p, labels=[0, 1]))}


def xgb_single(train: Any, test: Any, args: argparse.Namespace) -> dict[str, float]:
    """train_xgboost's params and matrix on ``train`` (an Arrow table), scored on ``test``."""
    import xgboost as xgb

    from dagspec.kinds.model_card import Features
    from dagspec.kinds.training.train_xgboost import TrainXGBoostParams
    from dagspec.kinds.training.xgboost_data import features_of

    params = TrainXGBoostParams(nthread=args.nthread, num_round=args.rounds)
    features = Features(
        features_col="features", input_columns=["features"], num_features=2**args.hash_bits, missing=0.0
    )
    t0 = time.perf_counter()
    label = train.column("label").to_numpy().astype("float32")
    dtrain = xgb.QuantileDMatrix(features_of(train, features), label=label, max_bin=params.max_bin, missing=0.0)
    booster = xgb.train({**params.booster_params(), "nthread": args.nthread}, dtrain, num_boost_round=params.num_round)
    fit_s = time.perf_counter() - t0
    p = booster.predict(xgb.DMatrix(features_of(test, features), missing=0.0))
    return {**_scores(test.column("label").to_numpy(), p), "fit_s": fit_s}


def vw(train: Any, test: Any, scratch: Path) -> dict[str, float]:
    """train_vw's ``_train`` (its defaults) on ``train``, VW's own predictions on ``test``."""
    import numpy as np
    import pyarrow.parquet as pq
    from vowpalwabbit import Workspace

    from dagspec.kinds.training.train_vw import TrainVWParams, _train
    from dagspec.kinds.training.vw_lines import example_lines

    params = TrainVWParams()
    scratch.mkdir(parents=True, exist_ok=True)
    pq.write_table(train, scratch / "train.parquet")
    t0 = time.perf_counter()
    _train([str(scratch / "train.parquet")], params, scratch, None, 0, scratch / "model.vw")
    fit_s = time.perf_counter() - t0
    workspace = Workspace(arg_list=["-i", str(scratch / "model.vw"), "-t", "--quiet"])
    try:
        p = np.array([workspace.predict(line) for line in example_lines(test, params.namespaces)])
    finally:
        workspace.finish()
    return {**_scores(test.column("label").to_numpy(), p), "fit_s": fit_s}


def measure(work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every size x repeat x engine: one result row each (printed as it comes)."""
    runs: list[dict[str, Any]] = []
    engines = [("xgb_single", "hashed"), *([("vw", "as_is")] if args.vw else [])]
    for engine, data in engines:
        pool, test = _table(work / f"train_{data}"), _table(work / f"test_{data}")
        for size in args.sizes:
            for rep in range(min(args.repeats, pool.num_rows // size)):
                train = pool.slice(rep * size, size)
                if engine == "xgb_single":
                    scores = xgb_single(train, test, args)
                else:
                    scores = vw(train, test, work / f"vw-{size}-{rep}")
                run = {
                    "engine": engine,
                    "size": size,
                    "rep": rep,
                    "clicks": float(train.column("label").to_numpy().mean()),
                    **scores,
                }
                print(json.dumps(run), flush=True)
                runs.append(run)
    return runs


def table(result: dict[str, Any]) -> str:
    """Per engine and size: the mean over repeats beside both published curves."""
    published = _published()
    old = {"xgb_single": (OLD_XGB_AUC, OLD_XGB_LOG_LOSS), "vw": (OLD_VW_AUC, {})}
    lines = [
        f"test rows {result['test_rows']:,}, test click rate {result['test_click_rate']:.4f}, "
        f"generated click rate {result['data']['click_rate']:.4f}; the generator's own probabilities "
        f"(the limit): ROC AUC {result['data']['ceiling']['roc_auc']:.4f}, "
        f"log loss {result['data']['ceiling']['log_loss']:.4f}",
        "| engine | train size | runs | ROC AUC | published (metrics.tsv) | old (metrics.old.tsv) "
        "| log loss | published | old | fit s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for engine in ("xgb_single", "vw"):
        curve = published["xgb" if engine == "xgb_single" else "vw"]
        old_auc, old_ll = old[engine]
        for size in sorted({r["size"] for r in result["runs"] if r["engine"] == engine}):
            runs = [r for r in result["runs"] if r["engine"] == engine and r["size"] == size]
            auc = [r["roc_auc"] for r in runs]
            ll = sum(r["log_loss"] for r in runs) / len(runs)
            fit = sum(r["fit_s"] for r in runs) / len(runs)
            spread = f" ({min(auc):.4f}-{max(auc):.4f})" if len(auc) > 1 else ""

            def fmt(v: float | None, digits: int = 4) -> str:
                return "-" if v is None else f"{v:.{digits}f}"

            lines.append(
                f"| {engine} | {size:,} | {len(runs)} | {sum(auc) / len(auc):.4f}{spread} "
                f"| {fmt(curve['ROC AUC'].get(size))} | {fmt(old_auc.get(size))} | {ll:.4f} "
                f"| {fmt(curve['Log loss'].get(size))} | {fmt(old_ll.get(size))} | {fit:.1f} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--test-rows", type=int, default=100_000, help="the test day's lines (and every day's)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="disjoint train slices per size, where the pool has them"
    )
    parser.add_argument("--seed", type=int, default=42, help="the generator's seed")
    parser.add_argument("--base-ctr", type=float, default=None, help="click rate (default: the generator's)")
    parser.add_argument("--hash-bits", type=int, default=17)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--nthread", type=int, default=2)
    parser.add_argument("--vw", action="store_true", help="also Vowpal Wabbit (train_vw's defaults)")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="NAME=JSON",
        help="override a constant of kinds/ctr/logs_generator.py for this run (a candidate signal)",
    )
    parser.add_argument("--work", default=None, help="scratch directory (default: a new temporary one)")
    parser.add_argument("--out", default=None, help="JSON results (default: WORK/generator_calibration.json)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dagspec-calibration-"))
    work.mkdir(parents=True, exist_ok=True)
    _override(args.set)
    spark = local_session()
    try:
        data = write_tables(spark, work, args)
    finally:
        spark.stop()
    print(json.dumps(data), flush=True)
    test_labels = _table(work / "test_hashed").column("label").to_numpy()
    result = {
        "args": vars(args),
        "data": data,
        "test_rows": len(test_labels),
        "test_click_rate": float(test_labels.mean()),
        "runs": measure(work, args),
        "loadavg": os.getloadavg(),
    }
    Path(args.out or work / "generator_calibration.json").write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
