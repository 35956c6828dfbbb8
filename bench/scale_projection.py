"""``bench/scale.py project``: from the measured CPU seconds per row of every stage at the largest
size run, the core-hours (and hours on a given core count) a run over ``--rows`` rows would cost.

Assumptions (stated with the table): a train-side stage's CPU grows linearly with the train size
from the largest measured size on (the slopes say whether that is fair); the test side (the test
day, its sample and features, every evaluation, the report) works on a fixed 10^6-line test set, as
the benchmark's, and costs what it cost there; a cluster turns core-hours into hours at
``--efficiency`` (the time-against-cores runs measure it). Left out: stages that only exist on
generated data (``logs``, ``events``: a real run reads day files instead) and single-node engines
(``xgb_single``: one machine cannot hold 4.4 x 10^9 rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scale_report import DEFAULT_MASTER, load_rows

GENERATED_ONLY = {"logs", "events"}
FIXED = {"test_day", "test", "hashed_test", "as_is_test", "report"}  # and every eval_*: the test set
SINGLE_NODE = {"xgb_single", "eval_xgb_single"}


def _h(hours: float) -> str:
    return f"{hours:,.1f}" if hours >= 10 else f"{hours:.2f}"


def _role(stage: str) -> str:
    if stage in GENERATED_ONLY:
        return "left out: generated data only"
    if stage in SINGLE_NODE:
        return "left out: single node"
    if stage in FIXED or stage.startswith("eval_"):
        return "fixed: the 10^6-line test set"
    return "linear in the rows"


def projection(paths: list[Path], pipeline: str, rows: float, cores: list[int], efficiency: float) -> str:
    """A markdown table: per stage, CPU s per 10^6 rows at the largest size, and the projection."""
    every = [r for k, r in load_rows(paths).items() if k[0] == pipeline and k[3] == DEFAULT_MASTER]
    measured: dict[str, dict[str, Any]] = {}
    for row in every:  # per stage: its row at the largest size that has CPU seconds
        if row["stage"] == "_run" or not row.get("cpu_s") or row.get("state") != "ran":
            continue
        if row["stage"] not in measured or row["size"] > measured[row["stage"]]["size"]:
            measured[row["stage"]] = row
    lines = [
        f"| stage | how it grows | measured at size | CPU s there | core-hours at {rows:,.0f} |",
        "|---|---|---:|---:|---:|",
    ]
    total = 0.0
    for stage, row in sorted(measured.items(), key=lambda kv: -kv[1]["cpu_s"] / kv[1]["size"]):
        role = _role(stage)
        linear = row["cpu_s"] / row["size"] * rows / 3600
        hours = linear if role.startswith("linear") else row["cpu_s"] / 3600
        total += 0 if role.startswith("left out") else hours
        shown = "-" if role.startswith("left out") else _h(hours)
        lines.append(f"| {stage} | {role} | {row['size']:,} | {row['cpu_s']:,.1f} | {shown} |")
    lines += ["", f"Total: **{_h(total)} core-hours**.", ""]
    lines += ["| cores | hours at efficiency " + f"{efficiency:.2f} |", "|---:|---:|"]
    lines += [f"| {c:,} | {_h(total / (c * efficiency))} |" for c in cores]
    return "\n".join(lines)
