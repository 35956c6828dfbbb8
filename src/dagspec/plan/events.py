"""What a stage's Airflow asset events say: a short summary of its committed checkpoint.

Airflow's Assets page shows each asset event's ``extra``. Every output of a stage is an asset
(``dagspec://<dag_id>/<stage>/<output>``); its event carries the rows written, the rows rejected,
the fingerprint, the output's checkpoint path and the stage's headline metrics. The summary is
built from the manifest alone, so a checkpoint hit reports exactly what the run that committed it
reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# metrics of the manifest worth a glance in the Assets page (models, evaluations, checks, gates)
HEADLINE_METRICS = (
    "roc_auc",
    "roc_auc_per_class",
    "log_loss",
    "accuracy",
    "train_time_s",
    "final_loss",
    "final_logloss",
    "rounds",
    "violations",
    "passed",
)


def asset_extra(manifest: Mapping[str, Any], output: str, checkpoint_path: str) -> dict[str, Any]:
    """The ``extra`` of the asset event of ``output``, from its stage's manifest.

    ``rows_out``: rows of this output (tables only); ``rows_rejected``: rows the stage put in its
    quarantine; ``checkpoint``: where this output is committed. Metrics the stage did not record are
    left out, not set to null.
    """
    metrics: Mapping[str, Any] = manifest.get("metrics") or {}
    extra: dict[str, Any] = {
        "stage": manifest.get("stage"),
        "kind": manifest.get("kind"),
        "fingerprint": manifest.get("fingerprint"),
        "checkpoint": checkpoint_path,
        "finished": manifest.get("finished"),
        "duration_s": manifest.get("duration_s"),
    }
    rows = (manifest.get("rows") or {}).get(output)
    if rows is not None:
        extra["rows_out"] = rows
    if metrics.get("rows_rejected") is not None:
        extra["rows_rejected"] = metrics["rows_rejected"]
    extra.update({key: metrics[key] for key in HEADLINE_METRICS if metrics.get(key) is not None})
    return extra
