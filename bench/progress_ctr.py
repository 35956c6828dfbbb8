"""What progress reporting costs a 10^6-row CTR stage: on against off, interleaved.

The stages measured are criteo_ctr's: ``hashed`` (ctr_features, 2^17 hashed dims, log1p: its
progress comes from the Spark Connect client's progress handler) and ``xgb_single``
(train_xgboost on one node, 200 rounds, 2 threads: its progress from the per-round hook). Each run
is ``dagspec run`` in Connect mode into a fresh storage root (every stage computes), with
``DAGSPEC_PROGRESS=1`` (the default) or ``0`` (no handler, no thread, no file), on and off
alternating round by round. A stage's cost is its manifest's ``duration_s`` and ``driver_cpu_s``
(the stage process's own CPU: the progress thread, handler and hook are in it; Spark's executors
are in the shared server and are not). ``event_log_mb``: what the run added to the server's event
logs (``.dagspec/spark-events``), for the three stages.

Usage: ``.venv/bin/dagspec generate criteo --rows 1000000 --days 1 --seed 42 --out WORK/gen``, then
``.venv/bin/python bench/progress_ctr.py --work WORK [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAGSPEC = str(Path(sys.executable).parent / "dagspec")
STAGES = ("hashed", "xgb_single")

SPEC = """
dag_id: progress_ctr
spark:
  conf: {{spark.sql.shuffle.partitions: 8}}
stages:
  raw: {{kind: read, params: {{format: criteo, path: "{gen}/day_00.tsv"}}}}
  hashed: {{kind: ctr_features, inputs: {{data: raw}}, params: {{mode: hashed, hash_bits: 17, log1p: true}}}}
  xgb_single: {{kind: train_xgboost, inputs: {{train: hashed}}, params: {{workers: 1, num_round: 200, nthread: 2}}}}
"""


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6 if folder.exists() else 0.0


def one_run(spec: Path, storage: Path, progress: str) -> dict[str, object]:
    shutil.rmtree(storage, ignore_errors=True)
    events = REPO / ".dagspec" / "spark-events"  # the local Connect server's event logs (dagspec.spark_history)
    events_before = _size_mb(events)
    env = {**os.environ, "DAGSPEC_PROGRESS": progress, "DAGSPEC_MODE": "connect"}
    started = time.time()
    done = subprocess.run(
        [DAGSPEC, "run", str(spec), "--storage-root", str(storage)],
        env=env, capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"dagspec run failed (progress={progress}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    lines = sum(1 for line in done.stdout.splitlines() if line.startswith("progress "))
    row: dict[str, object] = {"progress": progress, "wall_s": round(wall, 1), "progress_lines": lines}
    row["event_log_mb"] = round(_size_mb(events) - events_before, 2)  # what the run's stages added
    for stage in STAGES:
        (manifest,) = (storage / "progress_ctr" / stage).glob("*/manifest.json")
        data = json.loads(manifest.read_text())
        row[f"{stage}_s"] = data["duration_s"]
        row[f"{stage}_cpu_s"] = data["driver_cpu_s"]
    row["load_1min"] = round(os.getloadavg()[0], 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="holds gen/day_00.tsv; storage roots go here")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = args.work.resolve()
    pipelines = work / "pipelines"
    pipelines.mkdir(parents=True, exist_ok=True)
    spec = pipelines / "progress_ctr.yaml"
    spec.write_text(SPEC.format(gen=work / "gen"))
    rows = []
    for r in range(1, args.rounds + 1):
        for progress in ("1", "0"):
            row = {"round": r, **one_run(spec, work / f"storage-{progress}", progress)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    for progress in ("1", "0"):
        mine = [row for row in rows if row["progress"] == progress]
        medians = {k: statistics.median(float(row[k]) for row in mine) for k in mine[0] if k.endswith("_s")}
        print(f"progress={progress} medians: {json.dumps(medians)}")


if __name__ == "__main__":
    main()
