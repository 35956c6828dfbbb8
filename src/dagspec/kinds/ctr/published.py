"""The learning curve the CTR pipeline reproduces, as its source published it.

The Criteo 1 TiB benchmark trained XGBoost locally on the first 10^4 ... 10^7 lines of the real
logs and tested on 10^6 lines of a later day. Its ROC AUC at every size and its log loss at the two
ends are drawn beside the report's own curves, so a run on the real logs (``params.input``) can be
read against them. On the generated logs the levels differ (their clicks are easier to predict);
only the shapes compare.
"""

from __future__ import annotations

LABEL = "XGBoost, published (real Criteo 1TB, 10^6 test lines)"
# train size -> value
ROC_AUC: dict[int, float] = {
    10_000: 0.650,
    30_000: 0.670,
    100_000: 0.683,
    300_000: 0.694,
    1_000_000: 0.695,
    3_000_000: 0.696,
    10_000_000: 0.6965,
}
LOG_LOSS: dict[int, float] = {10_000: 0.1472, 10_000_000: 0.14323}
# report column -> the published points
CURVES: dict[str, dict[int, float]] = {"ROC AUC": ROC_AUC, "Log loss": LOG_LOSS}
