"""``bench/scale.py curves``: the learning curves of several ``scale.py run ctr`` runs, one size each.

Each run's ``report`` stage wrote ``metrics.tsv`` for its train sizes (``scale.py run`` also keeps
its rows in the JSON lines file, as a ``_report`` row, so a run folder can be thrown away); this
merges them (a later run of the same engine and size replaces an earlier one) and draws them with
the report stage's own code: ROC AUC, log loss, train time and maximum memory against the train size (log x), one line per
engine, the published curve of each engine that has one dashed beside them.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from dagspec.kinds.ctr.report import COLUMNS, learning_curves, plot_learning_curves


def _value(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def report_table(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of the newest ``report/metrics.tsv`` under one run's storage root ([] without one)."""
    tables = sorted(run_dir.glob("storage/*/report/*/report/metrics.tsv"), key=lambda p: p.stat().st_mtime)
    if not tables:
        return []
    with tables[-1].open(newline="") as handle:
        rows = [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(handle, delimiter="\t")]
    for row in rows:
        row["Train size"] = int(row["Train size"])
    return _with_intervals(rows, tables[-1].with_name("curves.json"))


def _with_intervals(rows: list[dict[str, Any]], curves_json: Path) -> list[dict[str, Any]]:
    """The rows with ``<column> low`` / ``high`` from the report's curves.json (metrics.tsv has no intervals)."""
    if not curves_json.is_file():
        return rows
    drawn = json.loads(curves_json.read_text())
    for column in ("ROC AUC", "Log loss"):
        bars = {
            (engine, int(size)): (low, high)
            for engine, points in drawn.get(f"{column} interval", {}).items()
            for size, low, high in points
        }
        for row in rows:
            low, high = bars.get((str(row["Engine"]), row["Train size"]), (None, None))
            row[f"{column} low"], row[f"{column} high"] = low, high
    return rows


def report_rows(source: Path) -> list[dict[str, Any]]:
    """A run folder's report table, or the ``_report`` rows ``scale.py run`` kept in a JSON lines file."""
    if source.is_file():
        rows = []
        for line in source.read_text().splitlines():
            record = json.loads(line)
            if record.get("stage") == "_report":
                rows.extend(record["report_rows"])
        return rows
    rows = report_table(source)
    if not rows:
        raise SystemExit(f"{source}: no report/metrics.tsv (did its report stage run?)")
    return rows


def curves(run_dirs: list[Path], out: Path) -> str:
    """Merged metrics.tsv, curves.json and the four plots into ``out``; a markdown table back."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for run_dir in sorted(run_dirs, key=lambda p: p.stat().st_mtime):
        for row in report_rows(run_dir):
            merged[(str(row["Engine"]), int(row["Train size"]))] = row
    rows = [merged[k] for k in sorted(merged)]
    for row in rows:  # intervals: error bars where the run's table has them
        for column in ("ROC AUC", "Log loss"):
            row.setdefault(f"{column} low", None)
            row.setdefault(f"{column} high", None)
    out.mkdir(parents=True, exist_ok=True)
    drawn = learning_curves(rows, published=True)
    (out / "curves.json").write_text(json.dumps(drawn, indent=1))
    plot_learning_curves(drawn, out)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * (len(COLUMNS) - 1)]
    for row in rows:
        cells = [str(row["Engine"]), f"{row['Train size']:,}"]
        for column in COLUMNS[2:]:
            value = row.get(column)
            cells.append(
                "-" if value is None else f"{value:.4f}" if column in ("ROC AUC", "Log loss") else f"{value:.1f}"
            )
        lines.append("| " + " | ".join(cells) + " |")
    with (out / "metrics.tsv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore", delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return "\n".join(lines)
