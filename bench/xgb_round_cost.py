"""XGBoost's cost per boosting round on criteo_ctr's features, plain xgboost only (no stage, no Airflow).

    .venv/bin/python bench/xgb_round_cost.py data --rows 10000 100000 1000000 --dir /tmp/xgb-cost
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/xgb_round_cost.py time /tmp/xgb-cost/h17_100000 --rounds 20

``data``: generated rows (``criteo_frame`` and the label as ``generate_criteo_logs`` draws it) turned
into ``hashed`` features (2^17 and 2^20, log1p) and ``as_is`` columns by ``dagspec.kinds.ctr``'s code in
one classic ``local[2]`` session, written as Parquet ``DIR/{h17,h20,asis}_ROWS``. ``time``: one such
table read with ``xgboost_data``'s readers, a QuantileDMatrix (or ``--dmatrix``) and ``xgboost.train``
with train_xgboost's params (eval on train, as the stage does); prints the populated columns, the
matrix build and the CPU milliseconds per round (``time.process_time``), and the peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def make_data(rows_list: list[int], out: Path, seed: int = 42) -> None:
    """Parquet tables h17_N, h20_N, asis_N for each N in ``rows_list``."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from dagspec.kinds.ctr.features import CtrFeaturesParams, as_is_features, hashed_features
    from dagspec.kinds.ctr.logs_generator import _u, calibrate_intercept, criteo_frame

    spark = SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g").getOrCreate()
    b0 = calibrate_intercept(spark, seed, 0.03)
    for rows in rows_list:
        frame = criteo_frame(spark, rows, 1, seed, 4)
        label = (_u(seed, 900) < 1 / (1 + F.exp(-(F.lit(b0) + F.col("signal"))))).cast("int")
        ints = [F.col(f"I{j}").cast("int").alias(f"I{j}") for j in range(1, 14)]
        frame.withColumn("label", label).select("label", *ints, *[f"C{j}" for j in range(1, 27)]).write.mode(
            "overwrite"
        ).parquet(str(out / f"raw_{rows}"))
        raw = spark.read.parquet(str(out / f"raw_{rows}"))
        for bits in (17, 20):
            hashed = hashed_features(raw, CtrFeaturesParams(mode="hashed", hash_bits=bits, log1p=True))
            hashed.write.mode("overwrite").parquet(str(out / f"h{bits}_{rows}"))
        as_is_features(raw, CtrFeaturesParams(mode="as_is")).write.mode("overwrite").parquet(str(out / f"asis_{rows}"))
        print(f"{rows} rows written", flush=True)
    spark.stop()


def time_rounds(path: str, rounds: int, max_bin: int, nthread: int, dmatrix: bool) -> str:
    """One line: rows, columns, populated columns, build and per-round CPU, peak RSS."""
    import numpy as np
    import pyarrow.dataset as ds
    import xgboost as xgb

    from dagspec.kinds.training.train_xgboost import TrainXGBoostParams
    from dagspec.kinds.training.xgboost_data import csr_from_vectors, dense_from_columns

    table = ds.dataset(path, format="parquet").to_table()
    y = table.column("label").to_numpy().astype(np.float32)
    if "features" in table.column_names:
        vectors = table.column("features").combine_chunks()
        x = csr_from_vectors(vectors, int(vectors.field("size")[0].as_py()))
        missing, populated = 0.0, int(np.unique(x.indices).size)
    else:
        x = dense_from_columns(table, [c for c in table.column_names if c != "label"])
        missing, populated = float("nan"), x.shape[1]
    del table
    params = {**TrainXGBoostParams(max_bin=max_bin).booster_params(), "nthread": nthread}
    cpu0 = time.process_time()
    if dmatrix:
        matrix = xgb.DMatrix(x, label=y, missing=missing, nthread=nthread)
    else:
        matrix = xgb.QuantileDMatrix(x, label=y, max_bin=max_bin, missing=missing, nthread=nthread)
    cpu1 = time.process_time()
    xgb.train(params, matrix, num_boost_round=rounds, evals=[(matrix, "train")], verbose_eval=False)
    cpu2 = time.process_time()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (
        f"{Path(path).name}: rows {x.shape[0]}, columns {x.shape[1]}, populated {populated}, "
        f"{'DMatrix' if dmatrix else 'QuantileDMatrix'} max_bin {max_bin} nthread {nthread}: build {cpu1 - cpu0:.1f} "
        f"CPU s, {(cpu2 - cpu1) / rounds * 1000:.0f} CPU ms/round over {rounds} rounds, peak RSS {rss:.0f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="write the feature tables")
    data.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    data.add_argument("--dir", default="/tmp/xgb-cost")
    timing = sub.add_parser("time", help="time xgboost.train on one table")
    timing.add_argument("table")
    timing.add_argument("--rounds", type=int, default=20)
    timing.add_argument("--max-bin", type=int, default=256)
    timing.add_argument("--nthread", type=int, default=2)
    timing.add_argument("--dmatrix", action="store_true", help="a DMatrix instead of a QuantileDMatrix")
    args = parser.parse_args()
    if args.command == "data":
        make_data(args.rows, Path(args.dir))
    else:
        print(time_rounds(args.table, args.rounds, args.max_bin, args.nthread, args.dmatrix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
