"""The learning curves the CTR pipeline reproduces, as their source published them.

The Criteo 1 TiB benchmark (rambler-digital-solutions/criteo-1tb-benchmark, ``results/metrics.tsv``,
the figures of its README) trained Vowpal Wabbit and XGBoost locally and Spark ML
LogisticRegression and RandomForest on a cluster, on the first 10^4 ... 3x10^9 lines of the real
logs (~3% clicks), and tested every model on 10^6 lines of a later day. The curves up to 10^7
lines, the range a run of this pipeline reaches, are drawn beside the report's own for every
engine of the run that one stands for, so a run on the real logs (``params.input``) reads against
them. On the generated logs the levels differ (their clicks are easier to predict); only the
shapes compare.

The repository's older ``results/metrics.old.tsv`` (xgb 0.650 ... 0.6965, vw 0.609 ... 0.720; its
"Train time" column is the row number) is not what the README's figures show; these are.
"""

from __future__ import annotations

from dataclasses import dataclass

_SOURCE = "published, real 1TB"


@dataclass(frozen=True)
class PublishedCurve:
    """One engine's published learning curve: train size -> value, per report column."""

    label: str
    engine: str = ""  # the run's engines it stands beside: this name, or a name starting ``<engine>_``
    color: str = "0.4"
    roc_auc: tuple[tuple[int, float], ...] = ()
    log_loss: tuple[tuple[int, float], ...] = ()

    def columns(self) -> dict[str, dict[int, float]]:
        """Report column -> the published points."""
        return {"ROC AUC": dict(self.roc_auc), "Log loss": dict(self.log_loss)}

    def stands_for(self, engine: str) -> bool:
        """Whether a run's engine (``xgb_single``, ``vw``, ...) is this curve's engine."""
        return engine == self.engine or engine.startswith(f"{self.engine}_")


_SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)


def _points(values: tuple[float, ...]) -> tuple[tuple[int, float], ...]:
    return tuple(zip(_SIZES, values, strict=True))


CURVES: tuple[PublishedCurve, ...] = (
    PublishedCurve(
        label=f"XGBoost ({_SOURCE})",
        engine="xgb",
        color="0.35",
        roc_auc=_points((0.6635, 0.6823, 0.6970, 0.7147, 0.7334, 0.7443, 0.7507)),
        log_loss=_points((0.14235, 0.14091, 0.13912, 0.13657, 0.13420, 0.13281, 0.13193)),
    ),
    PublishedCurve(
        label=f"VW ({_SOURCE})",
        engine="vw",
        color="tab:brown",
        roc_auc=_points((0.6175, 0.6473, 0.6832, 0.7014, 0.7163, 0.7279, 0.7395)),
        log_loss=_points((0.14452, 0.14223, 0.13934, 0.13745, 0.13589, 0.13479, 0.13352)),
    ),
    PublishedCurve(
        label=f"Spark ML LR ({_SOURCE})",
        engine="lr",
        color="tab:pink",
        roc_auc=_points((0.5777, 0.5938, 0.6122, 0.6448, 0.6841, 0.7205, 0.7422)),
        log_loss=_points((0.19141, 0.18135, 0.16978, 0.15526, 0.14252, 0.13575, 0.13306)),
    ),
    PublishedCurve(
        label=f"Spark ML RF ({_SOURCE})",
        engine="rf",
        color="tab:olive",
        roc_auc=_points((0.6662, 0.6863, 0.6982, 0.7049, 0.7072, 0.7079, 0.7086)),
        log_loss=_points((0.14107, 0.13929, 0.13837, 0.13775, 0.13749, 0.13743, 0.13734)),
    ),
)
LABELS = frozenset(curve.label for curve in CURVES)


def curves_for(engines: set[str]) -> list[PublishedCurve]:
    """The published curves of the run's engines (``xgb_single`` and ``xgb_spark`` share XGBoost's)."""
    return [curve for curve in CURVES if any(curve.stands_for(engine) for engine in engines)]
