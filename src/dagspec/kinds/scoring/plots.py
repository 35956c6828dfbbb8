"""ROC figures for evaluate and compare (matplotlib's Agg canvas: no display, no pyplot state)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

Curve = Mapping[str, Sequence[float]]  # {"fpr": [...], "tpr": [...]}


def plot_roc_panels(panels: Mapping[str, Mapping[str, Curve]], path: Path, *, title: str) -> Path:
    """One PNG: a panel per entry of ``panels`` (its title -> legend label -> curve), side by side.

    evaluate draws one panel with a curve per class; compare draws one panel per class (titled by
    the class's name) with a curve per model. The PNG's ``Description`` text lists the panels and
    their curves, for readers that cannot look (alt text, tests).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(1, len(panels))
    columns = min(n, 3)
    rows = math.ceil(n / columns)
    figure = Figure(figsize=(5.0 * columns, 4.6 * rows), layout="constrained")
    FigureCanvasAgg(figure)
    for i, (panel_title, curves) in enumerate(panels.items()):
        ax = figure.add_subplot(rows, columns, i + 1)
        for label, curve in curves.items():
            ax.plot(curve["fpr"], curve["tpr"], linewidth=1.4, label=label)
        ax.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=0.8)
        ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="false positive rate", ylabel="true positive rate")
        if panel_title:
            ax.set_title(panel_title)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    figure.suptitle(title)
    shown = "; ".join(f"{name or 'ROC'}: {', '.join(curves)}" for name, curves in panels.items())
    figure.savefig(path, dpi=110, metadata={"Title": title, "Description": shown})
    return path
