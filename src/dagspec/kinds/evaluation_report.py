"""The evaluation report: the typed ``metrics.json`` that ``evaluate`` writes and every report reader reads.

``gate``, ``report`` (the Criteo table), ``compare`` and the UI read an evaluate stage's
``metrics.json`` through ``read_evaluation_report`` / ``parse_evaluation_report`` and use its
fields; none keeps its own list of keys. Class-keyed maps are keyed by the class value as text
(``"0"``, ``"1"``), as JSON objects are. A report without ``report_version`` (written before
reports were versioned) or with a newer one is refused the same way everywhere
(``dagspec.kinds.versioned``). Only pydantic here: the Airflow side reads reports too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dagspec.kinds.versioned import parse_versioned, read_versioned, write_versioned

METRICS_FILE = "metrics.json"
REPORT_VERSION: Literal[1] = 1
EVALUATE_AGAIN = "run its evaluate stage again (dagspec run SPEC --force, or remove the checkpoint)"
Interval = tuple[float, float]
Overall = Literal["roc_auc", "accuracy", "log_loss"]
PerClass = Literal["roc_auc", "precision", "recall"]


class ConfusionMatrix(BaseModel):
    """Counts of (true class, predicted class), rows and columns in ``classes`` order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: Literal["true class"] = "true class"
    columns: Literal["predicted class"] = "predicted class"
    classes: list[int]
    matrix: list[list[int]]


class ClassCounts(BaseModel):
    """One class's support, precision and recall (None: no row predicted, or none of the class)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    support: int
    precision: float | None
    recall: float | None


class IntervalMethods(BaseModel):
    """How the report's confidence intervals were made."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: float = Field(gt=0, lt=1)
    roc_auc: str
    accuracy: str | None = None
    log_loss: str | None = None
    bootstrap_replicates: int = 0
    seed: int | None = None


class Counts(BaseModel):
    """What the counting pass gives (``scoring.metrics.counts_metrics``): rows, accuracy, log loss, counts."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")

    rows: int
    accuracy: float
    log_loss: float = Field(description="mean of -ln p(true class), p clipped to [clip_eps, 1 - clip_eps]")
    confusion_matrix: ConfusionMatrix
    per_class: dict[str, ClassCounts]


class EvaluationReport(Counts):
    """``metrics.json``: one model's classification metrics on one labelled table, with intervals."""

    report_version: Literal[1] = REPORT_VERSION
    model: str | None = Field(description="the training stage of the model evaluated")
    flavor: str
    task: Literal["binary", "multiclass"]
    classes: list[int]
    class_names: dict[str, str] = Field(description="class value -> name (the value when the card names none)")
    roc_auc: float | None = Field(description="binary: of the positive class; multiclass: the macro mean")
    roc_auc_ci: Interval | None = None
    roc_auc_per_class: dict[str, float | None] = Field(description="binary: the positive class only")
    roc_auc_per_class_ci: dict[str, Interval | None] = Field(default_factory=dict)
    accuracy_ci: Interval | None = None
    log_loss_ci: Interval | None = None
    intervals: IntervalMethods
    placements: str | None = Field(default=None, description="the per-row placements folder (evaluate's key_col)")
    train_time_s: float | None = None
    peak_memory_mb: float | None = None
    cpu_load: float | None = None
    clip_eps: float

    def value(self, metric: Overall) -> float | None:
        """An overall metric by name (a gate's or a table's column)."""
        return {"roc_auc": self.roc_auc, "accuracy": self.accuracy, "log_loss": self.log_loss}[metric]

    def interval(self, metric: Overall) -> Interval | None:
        """The confidence interval of an overall metric (None: evaluated without one)."""
        return {"roc_auc": self.roc_auc_ci, "accuracy": self.accuracy_ci, "log_loss": self.log_loss_ci}[metric]

    def per_class_values(self, metric: PerClass) -> dict[str, float | None]:
        """A per-class metric by class value (as text): the classes the report has it for."""
        if metric == "roc_auc":
            return dict(self.roc_auc_per_class)
        return {c: (n.precision if metric == "precision" else n.recall) for c, n in self.per_class.items()}

    def class_name(self, value: str) -> str:
        """The name of a class value (as text); the value itself when the report has none."""
        return self.class_names.get(value, value)

    def class_keys(self) -> list[str]:
        """The class values as text, in the model's order (the keys of the class-keyed maps)."""
        return [str(c) for c in self.classes]

    def write(self, report_dir: Path) -> Path:
        """Write ``metrics.json`` into a report directory."""
        return write_versioned(self, report_dir, METRICS_FILE)


def parse_evaluation_report(text: str | bytes, where: str) -> EvaluationReport:
    """A report from the text of a ``metrics.json`` (shown as ``where``); an old, newer or invalid one fails."""
    return parse_versioned(
        text,
        where,
        EvaluationReport,
        field="report_version",
        current=REPORT_VERSION,
        what="evaluation report",
        again=EVALUATE_AGAIN,
    )


def read_evaluation_report(report_dir: Path, *, shown_as: str | None = None) -> EvaluationReport:
    """The validated report of an evaluate stage's report directory; a missing, old, newer or invalid one fails."""
    return read_versioned(
        report_dir, METRICS_FILE, parse_evaluation_report, shown_as=shown_as, not_a="an evaluate report"
    )
