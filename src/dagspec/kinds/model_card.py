"""The model card: the typed ``model.json`` every training kind writes and every model reader validates.

A model directory (a training stage's files output ``model``) holds the model's artifact in its
library's own format and ``model.json``, a ``ModelCard``: what was trained (flavor, kind, params),
on which data (the fingerprints of its inputs), how long it took, what it reached, and what
inference needs (classes, label and input columns, shapes; the flavor's own keys). Only pydantic
here: the Airflow side may read cards too.

The JSON keys are those model.json always had (the scoring flavors read them by name); a card
without ``card_version`` was written before cards existed and is refused with the way out: run the
training stage again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from dagspec.errors import StageFailedError

if TYPE_CHECKING:
    from dagspec.kinds.base import StageContext

MODEL_CARD = "model.json"
CLASS_NAMES_KEY = "class_names"  # in a label column's Spark metadata
CARD_VERSION: Literal[1] = 1
Flavor = Literal["keras", "xgboost", "spark_ml"]


class TrainingData(BaseModel):
    """One input table a model was trained (or validated) on, by the checkpoint that holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    output: str
    fingerprint: str = Field(description="fingerprint of the stage that wrote it")
    content: str | None = Field(default=None, description="content digest of the output (None: not recorded)")


class ModelCard(BaseModel):
    """``model.json``: one saved model, described for its readers (predict, evaluate, gate, the UI).

    Keys beyond these fields (a trainer's run details: ``rounds``, ``history``, ``resumed_epoch``,
    ...) are kept as they are and read back unchanged.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    card_version: Literal[1] = CARD_VERSION
    flavor: Flavor
    kind: str = Field(description="the training kind that wrote it, e.g. train_xgboost")
    artifact: str = Field(min_length=1, description="the model file or folder inside the model directory")
    task: Literal["binary", "multiclass"]
    classes: list[StrictInt] = Field(description="label values, in the order of the model's outputs")
    class_names: list[str] | None = Field(default=None, description="a name per class (legends, table columns)")
    label_col: str
    features_col: str | None = None
    input_columns: list[str] = Field(description="the columns inference reads")
    input_shapes: dict[str, list[int | None]] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict, description="the training params")
    trained_on: dict[str, TrainingData] = Field(description="input role (train, validation) -> its data")
    train_time_s: float | None = None
    peak_memory_mb: float | None = None
    cpu_load: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict, description="final training metrics (loss per data set)")
    # the flavors' own keys
    inputs: list[dict[str, Any]] | None = Field(default=None, description="keras: the input encoders' specs")
    num_features: int | None = Field(default=None, description="xgboost: features per row")
    missing: float | None = Field(default=None, description="xgboost: the value that means missing")
    probability_col: str | None = Field(default=None, description="spark_ml: the fitted pipeline's probability column")

    @model_validator(mode="after")
    def _classes_fit(self) -> ModelCard:
        if len(self.classes) < 2 or len(set(self.classes)) != len(self.classes):
            raise ValueError(f"classes must be >= 2 distinct integers, got {self.classes}")
        if self.task != ("binary" if len(self.classes) == 2 else "multiclass"):
            raise ValueError(f"task {self.task!r} does not fit {len(self.classes)} classes")
        if self.class_names is not None and len(self.class_names) != len(self.classes):
            raise ValueError(f"class_names {self.class_names} do not name the {len(self.classes)} classes")
        return self

    def meta(self) -> dict[str, Any]:
        """The card as the JSON dict the flavors read (``meta["classes"]``, ``meta["artifact"]``, ...)."""
        return self.model_dump()

    def class_name(self, value: int) -> str:
        """The name of a class value; its value as text when the card names none."""
        if self.class_names is None or value not in self.classes:
            return str(value)
        return self.class_names[self.classes.index(value)]

    def write(self, model_dir: Path) -> Path:
        """Write ``model.json`` into a model directory."""
        path = model_dir / MODEL_CARD
        path.write_text(json.dumps(self.meta(), indent=2))
        return path


def read_model_card(model_dir: Path, *, shown_as: str | None = None) -> ModelCard:
    """The validated card of a model directory; a missing, old or invalid card fails with why."""
    path = model_dir / MODEL_CARD
    where = shown_as or str(model_dir)
    if not path.is_file():
        raise StageFailedError(f"{where} is not a model directory: no {MODEL_CARD}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise StageFailedError(f"{where}/{MODEL_CARD}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise StageFailedError(f"{where}/{MODEL_CARD}: must hold a JSON object")
    if "card_version" not in data:
        raise StageFailedError(
            f"{where}/{MODEL_CARD} was written before model cards (no card_version): run its training stage "
            "again (dagspec run ... -p force=true, or remove the checkpoint)"
        )
    try:
        return ModelCard.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'card'}: {error['msg']}" for error in exc.errors()
        )
        raise StageFailedError(f"{where}/{MODEL_CARD} is not a valid model card: {problems}") from None


def label_class_names(metadata: Mapping[str, Any]) -> list[str] | None:
    """The class names a label column's metadata carries (``{"class_names": [...]}``), else None.

    A stage that knows its classes by name (``topology_features``: QCD, tt, W+jets) sets them on
    the label columns; Spark keeps column metadata through Parquet, filters and selects.
    """
    names = metadata.get(CLASS_NAMES_KEY)
    return [str(n) for n in names] if isinstance(names, list) and names else None


def training_data(ctx: StageContext, roles: tuple[str, ...] = ("train", "validation")) -> dict[str, TrainingData]:
    """The inputs a trainer read, by role, as its card records them (roles not wired are left out)."""
    return {
        role: TrainingData(stage=source.stage, output=source.output, fingerprint=source.fingerprint,
                           content=source.content)
        for role, source in ctx.sources.items()
        if role in roles
    }  # fmt: skip
