"""Peak memory of single-node XGBoost on hashed CTR rows, per load mode (``train_xgboost``'s ``load``).

    .venv/bin/python bench/xgb_memory.py --rows 1000000 4000000 --rounds 10 --out bench/results/xgb-memory.json

Writes, once per size, Parquet shards shaped like criteo_ctr's ``hashed`` stage (a Spark ML sparse
vector of 2^17 dims per row: 13 numeric entries and 26 one-hot categorical ones, 39 non-zeros)
and then, in a fresh process per (rows, load), builds the matrix with ``quantile_matrix`` (the
stage's own code) and trains ``--rounds`` rounds with the stage's default (the benchmark's) params. A sampler thread
reads ``/proc/self/status`` every 0.1 s: the peak of anonymous memory (what the process really
holds) and ``VmHWM`` (the peak RSS, which also counts file pages it maps: external memory's
pages are read through the page cache).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DIMS = 1 << 17


def write_shards(rows: int, folder: Path, chunk: int = 250_000) -> None:
    """``rows`` hashed-like rows in files of ``chunk`` rows (26 categorical blocks of 5,000 buckets)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for part, start in enumerate(range(0, rows, chunk)):
        m = min(chunk, rows - start)
        categorical = (rng.zipf(1.3, (m, 26)) * 7919) % 5000 + np.arange(26) * 5000
        indices = np.concatenate([np.broadcast_to(130_000 + np.arange(13), (m, 13)), categorical], axis=1)
        values = np.concatenate([np.floor(rng.lognormal(1, 2, (m, 13))), np.ones((m, 26))], axis=1)
        offsets = pa.array(np.arange(0, m * 39 + 1, 39, dtype=np.int32))
        vector = pa.StructArray.from_arrays(
            [
                pa.array(np.zeros(m, np.int8)),
                pa.array(np.full(m, DIMS, np.int32)),
                pa.ListArray.from_arrays(offsets, pa.array(indices.ravel().astype(np.int32))),
                pa.ListArray.from_arrays(offsets, pa.array(values.ravel())),
            ],
            names=["type", "size", "indices", "values"],
        )
        label = pa.array((rng.random(m) < 0.25).astype(np.int32))
        pq.write_table(pa.table({"label": label, "features": vector}), folder / f"part-{part:05d}.parquet")


def measure(folder: Path, load: str, rounds: int, cache: Path) -> dict[str, Any]:
    """In this process: build the matrix as ``load`` says, train; peaks and times."""
    sys.path.insert(0, str(REPO / "src"))
    import xgboost as xgb

    from dagspec.kinds.model_card import Features
    from dagspec.kinds.training.train_xgboost import TrainXGBoostParams
    from dagspec.kinds.training.xgboost_data import parquet_files, quantile_matrix

    peak = {"anon_mb": 0}

    def status() -> dict[str, int]:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        return {k: int(fields[k].split()[0]) >> 10 for k in ("RssAnon", "RssFile", "VmHWM")}

    def poll() -> None:
        while True:
            peak["anon_mb"] = max(peak["anon_mb"], status()["RssAnon"])
            time.sleep(0.1)

    threading.Thread(target=poll, daemon=True).start()
    features = Features(features_col="features", input_columns=["features"], num_features=DIMS, missing=0.0)
    params = SimpleNamespace(
        label_col="label", max_bin=256, batch_rows=65536, in_memory_max_mb=2048, external_min_mb=0, load=load
    )
    started = time.time()
    matrix, mode = quantile_matrix(parquet_files(str(folder)), features, params, cache_dir=cache)
    built = {"build_s": round(time.time() - started, 1), "build_peak_anon_mb": peak["anon_mb"]}
    built["build_hwm_mb"] = status()["VmHWM"]
    started = time.time()
    xgb.train(
        {**TrainXGBoostParams().booster_params(), "nthread": 2},
        matrix,
        rounds,
        evals=[(matrix, "train")],
        verbose_eval=False,
    )
    time.sleep(0.2)
    return {
        "load": mode,
        **built,
        "train_s": round(time.time() - started, 1),
        "peak_anon_mb": peak["anon_mb"],
        "hwm_mb": status()["VmHWM"],
        "pages_mb": round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 4_000_000])
    p.add_argument("--loads", nargs="+", default=["memory", "stream", "external"])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--out", type=Path)
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # folder, load: the child process
    args = p.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as cache:
            print(json.dumps(measure(Path(args.one[0]), args.one[1], args.rounds, Path(cache) / "pages")))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            folder = Path(tmp) / str(rows)
            write_shards(rows, folder)
            for load in args.loads:
                argv = [sys.executable, __file__, "--one", str(folder), load, "--rounds", str(args.rounds)]
                out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
                result = {"rows": rows, "rounds": args.rounds, **json.loads(out.strip().splitlines()[-1])}
                print(json.dumps(result), flush=True)
                results.append(result)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
