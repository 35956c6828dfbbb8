"""Evaluation reports as evaluate writes them, for the readers' tests (gate, report, compare, the UI)."""

from __future__ import annotations

from typing import Any

from dagspec.kinds.evaluation_report import EvaluationReport


def evaluation_report(classes: tuple[int, ...] = (0, 1), **changes: Any) -> EvaluationReport:
    """A valid report over ``classes`` (700 rows per class), with ``changes`` over its fields."""
    keys = [str(c) for c in classes]
    k = len(classes)
    matrix = [[600 if i == j else 100 // (k - 1) for j in range(k)] for i in range(k)]
    fields: dict[str, Any] = {
        "model": "train",
        "flavor": "xgboost",
        "task": "binary" if k == 2 else "multiclass",
        "classes": list(classes),
        "class_names": {c: c for c in keys},
        "rows": sum(map(sum, matrix)),
        "accuracy": 600 * k / sum(map(sum, matrix)),
        "log_loss": 0.35,
        "confusion_matrix": {"classes": list(classes), "matrix": matrix},
        "per_class": {c: {"support": sum(matrix[i]), "precision": 0.86, "recall": 0.86} for i, c in enumerate(keys)},
        "roc_auc": 0.9,
        "roc_auc_per_class": {keys[-1]: 0.9} if k == 2 else dict.fromkeys(keys, 0.9),
        "intervals": {"level": 0.95, "roc_auc": "delong", "bootstrap_replicates": 0, "seed": 42},
        "clip_eps": 1e-15,
    }
    return EvaluationReport.model_validate({**fields, **changes})
