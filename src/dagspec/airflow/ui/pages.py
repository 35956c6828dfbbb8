"""The UI's three pages as HTML: a run's stages, one stage's results, and runs compared.

Links are absolute paths under the app's mount point (``base``), so they work inside the iframe
Airflow shows them in and in a tab of their own.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from dagspec.airflow.ui import files
from dagspec.airflow.ui.html import cell, data_uri, esc, image, line_plot, link, mapping_table, markdown, page
from dagspec.airflow.ui.html import table as html_table
from dagspec.airflow.ui.results import RunInfo, RunMetrics, StageRow, differing_params, metric_names, stage_metrics
from dagspec.errors import StageFailedError
from dagspec.kinds.base import IOType
from dagspec.kinds.evaluation_report import METRICS_FILE, parse_evaluation_report
from dagspec.kinds.model_card import MODEL_CARD, parse_model_card


def q(value: str) -> str:
    """One path segment, quoted (run ids hold ``:`` and ``+``)."""
    return quote(value, safe="")


def run_url(base: str, dag_id: str, run_id: str) -> str:
    return f"{base}/dags/{q(dag_id)}/runs/{q(run_id)}"


def stage_url(base: str, dag_id: str, run_id: str, stage: str) -> str:
    return f"{run_url(base, dag_id, run_id)}/stages/{q(stage)}"


def compare_url(base: str, dag_id: str, **query: Any) -> str:
    tail = f"?{urlencode(query)}" if query else ""
    return f"{base}/dags/{q(dag_id)}/compare{tail}"


def file_url(base: str, dag_id: str, relative: str) -> str:
    return f"{base}/dags/{q(dag_id)}/files/{quote(relative)}"


def _nav(base: str, run: RunInfo) -> list[tuple[str, str]]:
    return [
        (f"run {run.run_id}", run_url(base, run.dag_id, run.run_id)),
        (f"compare runs of {run.dag_id}", compare_url(base, run.dag_id)),
    ]


def _cache(row: StageRow) -> str:
    if row.record is None:
        return ""
    return f'<span class="{row.record.outcome}">{row.record.outcome}</span>'


def _now(row: StageRow) -> str:
    if row.record is None:
        return '<span class="muted">not recorded</span>'
    detail = f": {esc(row.now_detail)}" if row.now_detail else ""
    return f'<span class="{esc(row.now)}">{esc(row.now)}</span>{detail}'


def _relative(path: str, root: str) -> str:
    return posixpath.relpath(path, root) if path.startswith(f"{root.rstrip('/')}/") else path


def _progress(row: StageRow) -> str:
    """A running stage's latest progress line, as its job last wrote it."""
    p = row.progress
    if p is None:
        return ""
    return f'<div class="progress" title="updated {esc(p.updated)}">{esc(p.text())} ({p.elapsed_s:.0f} s)</div>'


def run_page(base: str, run: RunInfo, rows: Sequence[StageRow], root: str, note: str = "") -> str:
    """Every stage of a run as the run recorded it: task state, ran or hit, fingerprint, the checkpoint
    now, rows, duration, checkpoint; ``note`` says why there is nothing recorded."""
    headers = ["stage", "kind", "task", "cache", "fingerprint", "checkpoint now", "rows in", "rows out",
               "quarantined", "duration s", "checkpoint"]  # fmt: skip
    body_rows = []
    for row in rows:
        record = row.record
        task_state = (row.task.state if row.task else None) or "-"
        checkpoint = record.checkpoint if record else ""
        body_rows.append([
            f"<td>{link(stage_url(base, run.dag_id, run.run_id, row.name), row.name)}</td>",
            f"<td>{esc(record.kind if record else row.kind or '-')}</td>",
            f'<td class="{esc(task_state)}">{esc(task_state)}{_progress(row)}</td>',
            f"<td>{_cache(row)}</td>",
            f'<td class="fp">{esc(record.fingerprint if record else "-")}</td>',
            f"<td>{_now(row)}</td>",
            cell(record.rows_in if record else None), cell(row.rows_out), cell(row.rows_rejected),
            cell(record.duration_s if record else None),
            f'<td class="fp" title="{esc(checkpoint)}">{esc(_relative(checkpoint, root))}</td>',
        ])  # fmt: skip
    conf = mapping_table(dict(run.conf)) if run.conf else '<p class="muted">no conf: the spec\'s defaults</p>'
    noted = f'<p class="missing">{esc(note)}</p>' if note else ""
    body = (
        f"<p>state <b>{esc(run.state)}</b>, started {esc(run.start_date)}; storage root <code>{esc(root)}</code></p>"
        f"{noted}<h2>Stages</h2>{html_table(headers, body_rows, css='stages')}"
        f"<p class='muted'>as this run recorded each stage when its task ended; nothing is resolved again</p>"
        f"<h2>Conf</h2>{conf}"
    )
    return page(f"{run.dag_id}: {run.run_id}", body, _nav(base, run))


def _model_cards(checkpoint: str, names: Sequence[str]) -> str:
    parts = []
    for name in names:
        if posixpath.basename(name) != MODEL_CARD:
            continue
        text = files.read_bytes(f"{checkpoint}/{name}")
        try:  # the readers' own check: an old or newer card is refused here as in predict and evaluate
            card = parse_model_card(text or b"", name)
        except StageFailedError as exc:
            parts.append(f"<p class='failed'>{esc(exc)}</p>")
            continue
        classes = [f"{v} = {card.class_name(v)}" for v in card.classes]
        facts = {
            "flavor": card.flavor, "kind": card.kind, "task": card.task, "classes": ", ".join(classes),
            "label column": card.label_col, "input columns": ", ".join(card.input_columns),
            "train time s": card.train_time_s, "peak memory MB": card.peak_memory_mb, "artifact": card.artifact,
        }  # fmt: skip
        trained = [
            [f"<td>{esc(role)}</td>", f"<td>{esc(d.stage)}.{esc(d.output)}</td>",
             f'<td class="fp">{esc(d.fingerprint)}</td>', f'<td class="fp">{esc(d.content)}</td>']
            for role, d in card.trained_on.items()
        ]  # fmt: skip
        parts.append(
            f'<div class="model-card"><h3>Model card <code>{esc(name)}</code></h3>{mapping_table(facts)}'
            f"<h3>Trained on</h3>{html_table(['role', 'data', 'fingerprint', 'content'], trained)}"
            f"<h3>Training metrics</h3>{mapping_table(card.metrics)}<h3>Params</h3>{mapping_table(card.params)}</div>"
        )
    return "".join(parts)


def _evaluation_reports(checkpoint: str, names: Sequence[str]) -> str:
    parts = []
    for name in names:
        if posixpath.basename(name) != METRICS_FILE:
            continue
        try:  # read as gate, report and compare read it
            report = parse_evaluation_report(files.read_bytes(f"{checkpoint}/{name}") or b"", name)
        except StageFailedError as exc:
            parts.append(f"<p class='failed'>{esc(exc)}</p>")
            continue
        rows = [
            [f"<td>{esc(report.class_name(c))}</td>", cell(report.per_class[c].support),
             cell(report.per_class[c].precision), cell(report.per_class[c].recall),
             cell(report.roc_auc_per_class.get(c))]
            for c in report.class_keys() if c in report.per_class
        ]  # fmt: skip
        facts = {
            "model": report.model, "flavor": report.flavor, "task": report.task, "rows": report.rows,
            "ROC AUC": report.roc_auc, "ROC AUC interval": list(report.roc_auc_ci or []) or None, "log loss": report.log_loss,
            "accuracy": report.accuracy, "confidence level": report.intervals.level,
        }  # fmt: skip
        parts.append(
            f'<div class="evaluation"><h3>Evaluation report <code>{esc(name)}</code></h3>{mapping_table(facts)}'
            f"{html_table(['class', 'support', 'precision', 'recall', 'ROC AUC'], rows)}</div>"
        )
    return "".join(parts)


def _check_results(metrics: Mapping[str, Any]) -> str:
    parts = []
    results = metrics.get("results")
    if isinstance(results, list) and results and all(isinstance(r, dict) for r in results):
        rows = [[f"<td>{esc(r.get('column'))}</td>", f"<td>{esc(r.get('rule'))}</td>",
                 f"<td>{esc(r.get('observed'))}</td>",
                 f'<td class="{"passed" if r.get("passed") else "failed"}">{"ok" if r.get("passed") else "not met"}</td>']
                for r in results]  # fmt: skip
        parts.append(f"<h2>Check results</h2>{html_table(['column', 'rule', 'observed', 'result'], rows, css='check')}")
    if "passed" in metrics and "metric" in metrics:  # a gate
        verdict = "passed" if metrics.get("passed") else "failed"
        facts = {k: metrics.get(k) for k in ("metric", "min", "max", "values", "intervals", "failures", "model")}
        parts.append(f'<h2>Gate: <span class="{verdict}">{verdict}</span></h2>{mapping_table(facts)}')
    return "".join(parts)


def _reports(checkpoint: str, names: Sequence[str]) -> str:
    parts, shown = [], set()
    for name in names:
        if not name.endswith(".md"):
            continue
        text = (files.read_bytes(f"{checkpoint}/{name}") or b"").decode("utf-8", errors="replace")
        folder = posixpath.dirname(name)

        def source(src: str, folder: str = folder) -> str | None:
            target = posixpath.normpath(posixpath.join(folder, src))
            if "://" in src or src.startswith("/") or target.startswith("..") or target not in names:
                return None
            shown.add(target)
            content = files.read_bytes(f"{checkpoint}/{target}")
            return data_uri(target, content) if content else None

        parts.append(f'<div class="report"><p class="muted">{esc(name)}</p>{markdown(text, source)}</div>')
    for name in names:
        if name not in shown and data_uri(name, b"") is not None:
            content = files.read_bytes(f"{checkpoint}/{name}")
            if content:
                parts.append(f"<h3>{esc(name)}</h3><p>{image(name, content)}</p>")
    return "".join(parts)


def stage_page(base: str, run: RunInfo, row: StageRow, root: str) -> str:
    """One stage of a run: its reports and plots first, then check results, model cards, the metrics
    and facts the run recorded (cache, rows, duration, checkpoint), params and files."""
    record = row.record
    task_state = (row.task.state if row.task else None) or "-"
    if record is None:
        why = f"no record of this stage in this run (its task: {task_state})"
        return page(f"{run.dag_id}.{row.name}", f'<p class="missing">{esc(why)}</p>', _nav(base, run))
    facts = {
        "kind": record.kind, "fingerprint": record.fingerprint, "this run": record.outcome,
        "computed by run": record.committed_by or "-", "task state": task_state,
        "checkpoint now": f"{row.now}: {row.now_detail}" if row.now_detail else row.now,
        "rows in": record.rows_in, "rows out": record.rows or None, "rows quarantined": row.rows_rejected,
        "started": record.started, "finished": record.finished, "duration s": record.duration_s,
        "checkpoint": record.checkpoint,
    }  # fmt: skip
    stage_facts = f"<h2>Stage</h2>{mapping_table(facts)}"
    body = []
    if row.shows_files:
        tables = {name for name, kind in record.outputs.items() if kind == IOType.TABLE}
        names = files.checkpoint_files(record.checkpoint, tables)
        body += [_reports(record.checkpoint, names), _check_results(record.metrics)]
        body += [_model_cards(record.checkpoint, names), _evaluation_reports(record.checkpoint, names)]
    else:
        names = []
        body += [f'<p class="missing">{esc(row.now_detail)}</p>', _check_results(record.metrics)]
    headline = stage_metrics(record.metrics)
    if headline:
        body.append(f"<h2>Metrics</h2>{mapping_table(headline)}")
    body.append(stage_facts)
    if record.params:
        body.append(f"<h2>Params</h2>{mapping_table(record.params)}")
    dag_dir = f"{root.rstrip('/')}/{run.dag_id}"
    inside = _relative(record.checkpoint, dag_dir)
    if inside != record.checkpoint and names:
        listed = "".join(f"<li>{link(file_url(base, run.dag_id, f'{inside}/{n}'), n)}</li>" for n in names)
        body.append(f"<h2>Files</h2><ul>{listed}</ul>")
    return page(f"{run.dag_id}.{row.name}", "".join(body), _nav(base, run))


def compare_page(base: str, dag_id: str, compared: Sequence[RunMetrics], metric: str, limit: int) -> str:
    """A metric across the last runs: a table (the params that differed beside it) and a plot."""
    choices = metric_names(compared)
    if metric not in choices and choices:
        metric = next((m for m in choices if m == "roc_auc"), choices[0])
    stages = sorted({s for c in compared for s, v in c.values.items() if metric in v})
    varied = differing_params(compared)
    rows = []
    for c in compared:
        values = [cell(c.values.get(s, {}).get(metric)) for s in stages]
        params = [cell(c.params.get(p)) for p in varied]
        state = f'<td class="{esc(c.run.state)}">{esc(c.run.state)}</td>'
        rid = f"<td>{link(run_url(base, dag_id, c.run.run_id), c.run.run_id)}</td>"
        rows.append([rid, f"<td>{esc(c.run.start_date)}</td>", state, *params, *values,
                     f'<td class="failed">{esc(c.error)}</td>' if c.error else "<td></td>"])  # fmt: skip
    headers = ["run", "started", "state", *[f"param {p}" for p in varied], *stages, ""]
    oldest_first = list(reversed(compared))
    series = {s: [c.values.get(s, {}).get(metric) for c in oldest_first] for s in stages}
    labels = [f"{c.run.start_date:%m-%d %H:%M}" if c.run.start_date else c.run.run_id[-19:] for c in oldest_first]
    options = "".join(f"<option{' selected' if m == metric else ''}>{esc(m)}</option>" for m in choices)
    form = (
        f'<form method="get"><label>metric <select name="metric">{options}</select></label> '
        f'<label>last <input name="n" type="number" min="1" max="100" value="{limit}"> runs</label> '
        f"<button>show</button></form>"
    )
    body = (
        f"{form}<h2>{esc(metric)} per stage, newest run first</h2>{html_table(headers, rows, css='compare')}"
        f"<p class='muted'>as each run recorded them; params: the spec's params each run ran with (its conf over "
        f"the defaults of the day); only those that differ are shown</p>"
        f"<h2>Plot, oldest run first</h2>{line_plot(series, labels, metric)}"
    )
    return page(f"{dag_id}: runs compared", body, [(f"compare runs of {dag_id}", compare_url(base, dag_id))])


def error_page(title: str, message: str) -> str:
    """A page saying why there is nothing to show."""
    return page(title, f'<p class="failed">{esc(message)}</p>')
