"""The model card: the typed ``model.json`` every training kind writes and every model reader validates.

A model directory (a training stage's files output ``model``) holds the model's artifact in its
library's own format and ``model.json``, a ``ModelCard``: what was trained (flavor, kind, params),
on which data (the fingerprints of its inputs), how long it took, what it reached, and what
inference needs (classes, label and input columns, shapes; the flavor's own keys). Only pydantic
here: the Airflow side may read cards too.

Every reader (predict, evaluate, the flavors, the UI, the benchmarks) gets the card through
``read_model_card`` or ``parse_model_card`` and reads its fields; nothing turns it back into a
dict. The JSON keys are those model.json always had; a card without ``card_version`` (written
before cards existed) or with a newer one is refused the same way everywhere
(``dagspec.kinds.versioned``), with the way out: run the training stage again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.versioned import parse_versioned, read_versioned, write_versioned

if TYPE_CHECKING:
    from dagspec.kinds.base import StageContext

MODEL_CARD = "model.json"
CARD_VERSION: Literal[1] = 1
TRAIN_AGAIN = "run its training stage again (dagspec run SPEC --force, or remove the checkpoint)"
Flavor = Literal["keras", "xgboost", "spark_ml", "vw"]


class TrainingData(BaseModel):
    """One input table a model was trained (or validated) on, by the checkpoint that holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    output: str
    fingerprint: str = Field(description="fingerprint of the stage that wrote it")
    content: str | None = Field(default=None, description="content digest of the output (None: not recorded)")


class Features(BaseModel):
    """What an xgboost model reads of a row: one vector column (hashed), or numeric columns (as_is).

    The trainer derives it from the training data and writes its fields into the card
    (``features_col``, ``input_columns``, ``num_features``, ``missing``); inference reads it back
    with ``ModelCard.features``, so both build the same matrix.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    features_col: str | None = Field(default=None, description="the vector column; None: the numeric columns")
    input_columns: list[str] = Field(min_length=1, description="the columns the model reads")
    num_features: int = Field(ge=1, description="features per row")
    missing: float = Field(description="the value that means missing (0 for sparse vectors, NaN for columns)")


class VWNamespace(BaseModel):
    """One Vowpal Wabbit namespace of a ``train_vw`` model: its name and the columns that fill it.

    ``train_vw`` takes them as params and writes them into the card (``namespaces``); inference
    reads them back, so training and scoring build the same example lines.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        description="the namespace (VW's interactions, -q, name a namespace by its first letter)",
    )
    columns: list[str] = Field(min_length=1, description="the columns whose values go into this namespace")
    values: Literal["numeric", "categorical"] = Field(
        description="numeric: the feature <column>:<value>; categorical: the token <column>_<value> (weight 1);"
        " a missing value adds no feature"
    )
    log1p: bool = Field(default=False, description="numeric: log1p of positive values (heavy tails)")


class ModelCard(BaseModel):
    """``model.json``: one saved model, described for its readers (predict, evaluate, gate, the UI).

    Keys beyond these fields (a trainer's run details: ``rounds``, ``history``, ``resumed_epoch``,
    ...) are kept as they are and read back unchanged.
    """

    # NaN (xgboost's missing for as_is columns) is written as NaN, as model.json always had it
    model_config = ConfigDict(frozen=True, extra="allow", ser_json_inf_nan="constants")

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
    rounds: int | None = Field(default=None, description="xgboost: boosting rounds of the saved booster")
    namespaces: list[VWNamespace] | None = Field(default=None, description="vw: the namespaces of an example line")

    @model_validator(mode="after")
    def _classes_fit(self) -> ModelCard:
        if len(self.classes) < 2 or len(set(self.classes)) != len(self.classes):
            raise ValueError(f"classes must be >= 2 distinct integers, got {self.classes}")
        if self.task != ("binary" if len(self.classes) == 2 else "multiclass"):
            raise ValueError(f"task {self.task!r} does not fit {len(self.classes)} classes")
        if self.class_names is not None and len(self.class_names) != len(self.classes):
            raise ValueError(f"class_names {self.class_names} do not name the {len(self.classes)} classes")
        return self

    def features(self) -> Features:
        """What the model reads of a row (xgboost cards: they record ``num_features`` and ``missing``)."""
        if self.num_features is None or self.missing is None:
            raise StageFailedError(
                f"the {self.flavor} model card of {self.kind} has no num_features/missing: not an xgboost model"
            )
        return Features(
            features_col=self.features_col,
            input_columns=self.input_columns,
            num_features=self.num_features,
            missing=self.missing,
        )

    def vw_namespaces(self) -> list[VWNamespace]:
        """The namespaces a vw model's example lines are built from (vw cards record them)."""
        if not self.namespaces:
            raise StageFailedError(f"the {self.flavor} model card of {self.kind} has no namespaces: not a vw model")
        return self.namespaces

    def class_names_by_value(self) -> dict[str, str]:
        """Class value (as text) -> its name, for every class (the value stands in for a missing name)."""
        return {str(c): self.class_name(c) for c in self.classes}

    def class_name(self, value: int) -> str:
        """The name of a class value; its value as text when the card names none."""
        if self.class_names is None or value not in self.classes:
            return str(value)
        return self.class_names[self.classes.index(value)]

    def write(self, model_dir: Path) -> Path:
        """Write ``model.json`` into a model directory."""
        return write_versioned(self, model_dir, MODEL_CARD)


def parse_model_card(text: str | bytes, where: str) -> ModelCard:
    """A card from the text of a ``model.json`` (shown as ``where``); an old, newer or invalid one fails with why."""
    return parse_versioned(
        text, where, ModelCard, field="card_version", current=CARD_VERSION, what="model card", again=TRAIN_AGAIN
    )


def read_model_card(model_dir: Path, *, shown_as: str | None = None) -> ModelCard:
    """The validated card of a model directory; a missing, old, newer or invalid card fails with why."""
    return read_versioned(model_dir, MODEL_CARD, parse_model_card, shown_as=shown_as, not_a="a model directory")


def training_data(ctx: StageContext, roles: tuple[str, ...] = ("train", "validation")) -> dict[str, TrainingData]:
    """The inputs a trainer read, by role, as its card records them (roles not wired are left out)."""
    return {
        role: TrainingData(stage=source.stage, output=source.output, fingerprint=source.fingerprint,
                           content=source.content)
        for role, source in ctx.sources.items()
        if role in roles
    }  # fmt: skip
