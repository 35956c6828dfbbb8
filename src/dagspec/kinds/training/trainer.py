"""What the model trainers declare alike: their roles and where a ``workers``-sized trainer runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagspec.kinds.base import FILES, TABLE, DriverNeed, DriverNeedOf, InputRole, IOType

# a trainer reads ``train`` (and ``validation`` when given) and writes the model's files
TRAINER_INPUTS: Mapping[str, IOType | InputRole] = {"train": TABLE, "validation": InputRole(TABLE, required=False)}
MODEL_OUTPUT: Mapping[str, IOType] = {"model": FILES}


def by_workers(distributed: str) -> DriverNeedOf:
    """The driver need of a trainer with a ``workers`` param: ``workers: 1`` trains in the stage's
    process from the Parquet shards; ``workers >= 2`` needs a driver of its own, ``distributed`` says why."""

    def need(params: Any) -> tuple[DriverNeed, str]:
        if params.workers == 1:
            return "process", "trains from the Parquet shards (workers: 1)"
        return "own", distributed

    return need
