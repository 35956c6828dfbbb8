"""Small HTML building blocks of the UI's pages: escaping, tables, markdown, inline images and an SVG plot.

Every value from a manifest, a report or a request is escaped; markdown is rendered with raw HTML
off, so a report cannot inject markup into the Airflow UI's origin.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from markdown_it import MarkdownIt

IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 16px; color: #1a202c; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 24px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #cbd5e0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #edf2f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .fp { font-family: ui-monospace, monospace; font-size: 12px; }
.done, .success, .ran, .passed, .committed { color: #276749; }
.missing, .failed, .refused, .removed, .broken { color: #c53030; }
.hit { color: #2b6cb0; } .replaced { color: #b7791f; } .muted { color: #718096; } nav a { margin-right: 14px; }
.progress { color: #4a5568; font-size: 90%; white-space: nowrap; }
img.plot { max-width: 100%; border: 1px solid #e2e8f0; }
"""


def esc(value: Any) -> str:
    """Text for HTML (None as an empty cell)."""
    return "" if value is None else html.escape(str(value))


def number(value: Any, digits: int = 4) -> str:
    """A number as the tables print it: integers with separators, floats to ``digits`` places."""
    if isinstance(value, bool) or value is None:
        return esc(value)
    if isinstance(value, int):
        return f"{value:,d}"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if math.isfinite(value) else str(value)
    return esc(value)


def cell(value: Any) -> str:
    """A table cell: numbers right-aligned, lists and dicts as compact JSON."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num">{number(value)}</td>'
    if isinstance(value, list | dict):
        return f"<td><code>{esc(json.dumps(value, default=str))}</code></td>"
    return f"<td>{esc(value)}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, css: str = "") -> str:
    """A table from escaped headers and pre-rendered ``<td>`` cells."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    klass = f' class="{esc(css)}"' if css else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def mapping_table(values: Mapping[str, Any]) -> str:
    """A two-column key/value table."""
    return table(["key", "value"], [[f"<td>{esc(k)}</td>", cell(v)] for k, v in values.items()])


def link(href: str, text: str) -> str:
    """An escaped link (``href`` built by the pages, quoted)."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def data_uri(name: str, content: bytes) -> str | None:
    """An image inline (``data:`` URI), so it shows inside Airflow's sandboxed iframe too."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    kind = IMAGE_TYPES.get(suffix)
    if kind is None:
        return None
    return f"data:{kind};base64,{base64.b64encode(content).decode()}"


def image(name: str, content: bytes) -> str:
    """An ``<img>`` of a stored plot, inline."""
    uri = data_uri(name, content)
    return f'<img class="plot" alt="{esc(name)}" title="{esc(name)}" src="{uri}">' if uri else ""


def markdown(text: str, image_source: Callable[[str], str | None]) -> str:
    """A markdown report as HTML (tables included, raw HTML escaped); ``image_source`` maps an
    image's relative ``src`` to a data URI (None: the image is left out)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def render_image(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        uri = image_source(str(token.attrGet("src") or ""))
        alt = "".join(child.content for child in token.children or [])
        return f'<img class="plot" alt="{esc(alt)}" src="{uri}">' if uri else f"[{esc(alt)}]"

    md.add_render_rule("image", render_image)
    return str(md.render(text))


def page(title: str, body: str, nav: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page: title, links across the views, body."""
    links = "".join(link(href, text) for text, href in nav)
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{STYLE}</style></head><body><nav>{links}</nav><h1>{esc(title)}</h1>{body}</body></html>"
    )


def line_plot(series: Mapping[str, Sequence[float | None]], labels: Sequence[str], y_label: str) -> str:
    """An inline SVG with one line per series over ``labels`` (x, oldest first); gaps where None."""
    width, height, left, right, top, bottom = 760, 320, 90, 170, 30, 70
    values = [v for points in series.values() for v in points if v is not None]
    if not values or not labels:
        return '<p class="muted">nothing to plot</p>'
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.01 or 0.01
    low, high = low - pad, high + pad
    step = (width - left - right) / max(len(labels) - 1, 1)

    def x(i: int) -> float:
        return left + i * step if len(labels) > 1 else left + (width - left - right) / 2

    def y(v: float) -> float:
        return top + (high - v) / (high - low) * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{left}" y="{top - 14}" font-size="12" font-weight="bold">{esc(y_label)}</text>')
    for k in range(5):
        v = low + (high - low) * k / 4
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e2e8f0"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.4g}</text>')
    for i, label in enumerate(labels):
        parts.append(
            f'<text x="{x(i):.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {x(i):.1f} {height - bottom + 14})">{esc(label)}</text>'
        )
    for n, (name, points) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        drawn = [(x(i), y(v)) for i, v in enumerate(points) if v is not None]
        if len(drawn) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in drawn)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{color}"/>' for a, b in drawn]
        ly = top + 14 * n + 8
        parts.append(f'<rect x="{width - right + 12}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{width - right + 26}" y="{ly + 1}" font-size="11">{esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
