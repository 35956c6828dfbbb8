"""``bench/scale.py report``: the rows of ``scale.py run`` as markdown tables, slopes and plots."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

MB = 1024 * 1024
# roles shown in the table: one process's peak (client, driver JVM, server JVM); workers: all together
RSS_COLUMNS = (("client", "peak_rss_mb"), ("driver_jvm", "peak_rss_mb"), ("connect_server", "peak_rss_mb"))


DEFAULT_MASTER = "local[*]"


def load_rows(paths: list[Path]) -> dict[tuple[str, int, str, str], dict[str, Any]]:
    """``{(pipeline, size, task, master): row}``; a later row of the same key replaces an earlier one."""
    rows = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row["stage"] == "_report":  # the learning curve's table: scale.py curves reads it
                    continue
                rows[(row["pipeline"], row["size"], row["task"], row.get("master", DEFAULT_MASTER))] = row
    return rows


def master_cores(master: str) -> str:
    """How the time-against-cores table names a master: ``local[2]`` as is, a cluster by its address."""
    return master if master.startswith("local[") else f"cluster {master.split('//', 1)[-1]}"


def _by_cores(master: str) -> tuple[int, int, str]:
    """``local[1]``, ``local[2]``, ..., ``local[*]``, then clusters."""
    if master.startswith("local["):
        inner = master[6:-1]
        return (0, int(inner) if inner.isdigit() else 1 << 30, master)
    return (1, 0, master)


def cores_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per stage, its time on each master (one size) and its speed-up over the first master (fewest
    cores: ``local[1]``): the time-against-cores table; a last row sums the stages."""
    masters = sorted({r.get("master", DEFAULT_MASTER) for r in rows}, key=_by_cores)
    submitted = {r.get("master", DEFAULT_MASTER) for r in rows if r.get("mode") == "spark"}
    names = [master_cores(m) + (" (spark-submit)" if m in submitted else "") for m in masters]
    lines = [
        "| stage | rows | " + " | ".join(f"{name}: stage s / CPU s (speed-up)" for name in names) + " |",
        "|---|---:|" + "---:|" * len(masters),
    ]
    by_stage: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r.get("stage_s") is not None:
            by_stage[r["stage"]][r.get("master", DEFAULT_MASTER)] = r
    total: dict[str, float] = defaultdict(float)
    for stage, per in by_stage.items():
        cells = []
        base = per.get(masters[0], {}).get("stage_s")
        for m in masters:
            if m not in per:
                cells.append("-")
                continue
            total[m] += per[m]["stage_s"]
            speedup = f" ({base / per[m]['stage_s']:.2f}x)" if base and m != masters[0] else ""
            cells.append(f"{_f(per[m]['stage_s'])} / {_f(per[m].get('cpu_s'))}{speedup}")
        n = next(iter(per.values())).get("rows")
        lines.append(f"| {stage} | {_f(n)} | {' | '.join(cells)} |")
    if all(m in total for m in masters):
        cells = [
            f"{total[m]:.1f}" + (f" ({total[masters[0]] / total[m]:.2f}x)" if m != masters[0] else "") for m in masters
        ]
        lines.append(f"| **all stages** | | {' | '.join(cells)} |")
    return lines


def cores_plot(rows: list[dict[str, Any]], png: Path) -> None:
    """time_vs_cores: each stage's time on each master, grouped bars (the cores table drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    masters = sorted({r.get("master", DEFAULT_MASTER) for r in rows}, key=_by_cores)
    stages = list(dict.fromkeys(r["stage"] for r in rows if r.get("stage_s") is not None))
    per = {(r["stage"], r.get("master", DEFAULT_MASTER)): r["stage_s"] for r in rows if r.get("stage_s") is not None}
    fig, ax = plt.subplots(figsize=(9, 5))
    width = 0.8 / len(masters)
    for i, master in enumerate(masters):
        xs = [j + i * width for j in range(len(stages))]
        ax.bar(xs, [per.get((stage, master), 0.0) for stage in stages], width, label=master_cores(master))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(stages))], stages, rotation=30, ha="right")
    ax.set(ylabel="stage time (s)", title="time against cores (lower is faster)")
    ax.legend(fontsize=8)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float | int) and abs(value) >= 10_000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def slope(points: list[tuple[float, float | None]]) -> float | None:
    """log-log slope of y against x between the two largest x (None when x or y do not differ)."""
    found = sorted((x, y) for x, y in points if x and y)
    if len(found) < 2 or found[-1][0] == found[-2][0]:
        return None
    (x1, y1), (x2, y2) = found[-2], found[-1]
    return math.log(y2 / y1) / math.log(x2 / x1)


def _stage_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| stage | size | state | task wall s | stage s | rows | CPU s | rows / CPU s | client MB | driver JVM MB "
        "| server JVM MB | Python workers MB (sum) | shuffle write MB | spill MB (memory / disk) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        rss = [_f(row.get(key, {}).get(role)) for role, key in RSS_COLUMNS]
        # a client lives one stage: its VmHWM is its exact peak (the manifest's getrusage peak is not:
        # a forked child's ru_maxrss starts from its parent's, the Airflow process's)
        rss[0] = _f(row.get("peak_hwm_mb", {}).get("client") or row.get("peak_rss_mb", {}).get("client"))
        workers = _f(row.get("peak_rss_sum_mb", {}).get("python_worker"))
        shuffle = row.get("shuffle_write_bytes")
        spill = (row.get("memory_spill_bytes"), row.get("disk_spill_bytes"))
        spill_text = "-" if spill[0] is None else f"{spill[0] / MB:.0f} / {(spill[1] or 0) / MB:.0f}"
        lines.append(
            f"| {row['stage']} | {row['size']:,} | {row['state']} | {_f(row.get('task_wall_s'))} "
            f"| {_f(row.get('stage_s'))} | {_f(row.get('rows'))} | {_f(row.get('cpu_s'))} "
            f"| {_f(row.get('rows_per_cpu_s'))} | {' | '.join(rss)} | {workers} "
            f"| {'-' if shuffle is None else f'{shuffle / MB:.1f}'} | {spill_text} |"
        )
    return lines


def _slope_table(by_stage: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        "| stage | rows (two largest sizes) | slope of stage time | slope of CPU s | slope of task wall |",
        "|---|---|---:|---:|---:|",
    ]
    for stage, rows in by_stage.items():
        done = [r for r in rows if r.get("rows") and r.get("stage_s") is not None]
        if len(done) < 2:
            continue
        xs = sorted({r["rows"] for r in done})[-2:]
        slopes = [slope([(r["rows"], r.get(key)) for r in done]) for key in ("stage_s", "cpu_s", "task_wall_s")]
        text = ["-" if s is None else (f"**{s:.2f}**" if s > 1.1 else f"{s:.2f}") for s in slopes]
        lines.append(f"| {stage} | {' -> '.join(f'{x:,}' for x in xs)} | {' | '.join(text)} |")
    return lines


def _plots(
    pipeline: str, by_stage: dict[str, list[dict[str, Any]]], runs: list[dict[str, Any]], folder: Path
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 5))
    for stage, rows in by_stage.items():
        pts = sorted((r["rows"], r["stage_s"]) for r in rows if r.get("rows") and r.get("stage_s"))
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=stage)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="rows the stage handles",
        ylabel="stage time (s)",
        title=f"{pipeline}: time against rows",
    )
    ax.legend(fontsize=7)
    time_png = folder / f"{pipeline}_time.png"
    fig.savefig(time_png, dpi=100, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 5))
    roles = sorted({role for r in runs for role in r.get("peak_rss_mb", {})})
    for role in roles:
        pts = sorted((r["size"], r["peak_rss_mb"][role]) for r in runs if role in r.get("peak_rss_mb", {}))
        ax.plot(*zip(*pts, strict=True), marker="o", label=role)
    ax.set(
        xscale="log",
        xlabel="size (train rows / events)",
        ylabel="peak RSS of one process (MB)",
        title=f"{pipeline}: peak RSS per role, whole run",
    )
    ax.legend(fontsize=7)
    rss_png = folder / f"{pipeline}_rss.png"
    fig.savefig(rss_png, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return [f"![{pipeline} time]({time_png})", f"![{pipeline} RSS]({rss_png})"]


def report(paths: list[Path], plots: Path | None) -> str:
    """Per pipeline: the per-stage table, the whole runs, the slopes (and plots into ``plots``)."""
    every = load_rows(paths)
    rows = {k: r for k, r in every.items() if k[3] == DEFAULT_MASTER}
    out: list[str] = []
    for pipeline, size in sorted({(k[0], k[1]) for k in every if k[3] != DEFAULT_MASTER}):
        same = [r for k, r in every.items() if k[:2] == (pipeline, size) and r["stage"] != "_run"]
        out += [f"### {pipeline} at {size:,}: time against cores", "", *cores_table(same), ""]
        if plots is not None:
            png = plots / f"{pipeline}_{size}_time_vs_cores.png"
            cores_plot(same, png)
            out += [f"![{pipeline} time against cores]({png})", ""]
    for pipeline in sorted({k[0] for k in rows}):
        mine = sorted(
            (r for k, r in rows.items() if k[0] == pipeline), key=lambda r: (r["size"], r.get("stage_s") is None)
        )
        stages = [r for r in mine if r["stage"] != "_run"]
        runs = [r for r in mine if r["stage"] == "_run"]
        by_stage: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in stages:
            by_stage[row["stage"]].append(row)
        out += [f"### {pipeline}: per stage", "", *_stage_table([r for rs in by_stage.values() for r in rs]), ""]
        out += [
            f"### {pipeline}: whole runs",
            "",
            "| size | state | wall s | CPU s | load avg start / end | peak RSS MB per role (one process) |",
            "|---:|---|---:|---:|---|---|",
        ]
        for r in runs:
            rss = ", ".join(f"{k} {v:.0f}" for k, v in r.get("peak_rss_mb", {}).items())
            out.append(
                f"| {r['size']:,} | {r['state']} | {_f(r['task_wall_s'])} | {_f(r.get('cpu_s'))} | {r['load_avg_start'][0]} / {r['load_avg_end'][0]} | {rss} |"
            )
        out += [
            "",
            f"### {pipeline}: log-log slopes between the two largest sizes (> 1.1 in bold)",
            "",
            *_slope_table(by_stage),
            "",
        ]
        if plots is not None:
            out += [*_plots(pipeline, by_stage, runs, plots), ""]
    return "\n".join(out)
