"""A stage input that reads another spec's stage output: ``{spec: ctr_ingest, output: features.data}``.

An in-spec input is a string (``stage`` or ``stage.output``); another spec's output is a mapping,
so the two cannot be mistaken for each other. The reading stage reads the upstream stage's last
committed checkpoint (its ``_LATEST`` pointer under the shared storage root), and its cache key
holds that checkpoint's identity (``dagspec.plan.resolve``). Whether the named spec and output
exist is checked against the folder (``dagspec.spec.asset_links``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from dagspec.spec.partitions import PartitionWindow
from dagspec.spec.schedule import UNION_TAG_PREFIX

SPEC_OUTPUT_PATTERN = r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"
_DAG_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"  # as dagspec.spec.models.DAG_ID_PATTERN
_STAGE_TAG = f"{UNION_TAG_PREFIX}stage"
_SPEC_TAG = f"{UNION_TAG_PREFIX}spec"
_WINDOW_TAG = f"{UNION_TAG_PREFIX}window"


class SpecInput(BaseModel):
    """An output of another spec of the folder, read from that stage's last committed checkpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str = Field(pattern=_DAG_ID_PATTERN, description="the dag_id of the spec whose output this stage reads")
    output: str = Field(
        pattern=SPEC_OUTPUT_PATTERN, description="'<stage>.<output>' of that spec (as in its asset name)"
    )

    @property
    def stage(self) -> str:
        """The upstream stage's name."""
        return self.output.partition(".")[0]

    @property
    def output_name(self) -> str:
        """The upstream output's name within its stage."""
        return self.output.partition(".")[2]

    @property
    def asset(self) -> str:
        """``<dag_id>.<stage>.<output>``: the asset the upstream task emits."""
        return f"{self.spec}.{self.output}"


def _input_form(value: Any) -> str:
    if isinstance(value, PartitionWindow) or (isinstance(value, dict) and "stage" in value and "spec" not in value):
        return _WINDOW_TAG
    return _SPEC_TAG if isinstance(value, dict | SpecInput) else _STAGE_TAG


StageInput = Annotated[
    Annotated[str, Tag(_STAGE_TAG)]
    | Annotated[SpecInput, Tag(_SPEC_TAG)]
    | Annotated[PartitionWindow, Tag(_WINDOW_TAG)],
    Discriminator(_input_form),
]
