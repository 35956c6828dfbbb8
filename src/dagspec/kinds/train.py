"""Training kinds for Keras models: ``train_keras`` (pydantic only: no TensorFlow or Spark here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dagspec.registry import InputRole, IOType, KindDef, StageParams, register

Architecture = Literal["hlf_dense", "particle_gru", "inclusive", "logistic", "wide_deep"]

# The columns ``topology_features`` writes (physics) and the CTR pipelines' hashed vector.
DEFAULT_FEATURES: dict[str, str] = {
    "hlf_dense": "HLF_input",
    "particle_gru": "GRU_input",
    "inclusive": "GRU_input",
    "logistic": "features",
    "wide_deep": "features",
}
DEFAULT_LABELS: dict[str, str] = {
    "hlf_dense": "encoded_label",
    "particle_gru": "encoded_label",
    "inclusive": "encoded_label",
    "logistic": "label",
    "wide_deep": "label",
}
BINARY_ARCHITECTURES = ("logistic", "wide_deep")


class TrainKerasParams(StageParams):
    """A Keras classifier trained by a custom loop, on one process or N Spark barrier tasks.

    ``batch_size`` is per worker: the global batch is ``batch_size * workers``.
    """

    architecture: Architecture
    features_col: str | None = Field(
        default=None,
        min_length=1,
        description="feature column (inclusive: the particle sequence); default per architecture",
    )
    hlf_col: str | None = Field(default=None, min_length=1, description="inclusive only: the 14 HLF (HLF_input)")
    label_col: str | None = Field(
        default=None, min_length=1, description="one-hot array or integer class; default per architecture"
    )
    num_classes: int = Field(default=3, ge=2, description="multiclass architectures: number of classes")
    epochs: int = Field(default=5, ge=1, le=100_000)
    batch_size: int = Field(default=128, ge=1, le=1_000_000, description="per worker")
    learning_rate: float = Field(default=1e-3, gt=0, le=10)
    seed: int = 42
    workers: int = Field(default=1, ge=1, le=1024, description=">= 2: synchronous data-parallel Spark barrier tasks")
    steps_per_execution: int = Field(
        default=32, ge=1, le=100_000, description="training steps per compiled call (fewer Python round trips)"
    )
    max_particles: int | None = Field(
        default=None, ge=1, description="pad/truncate sequences to this length (default: longest in the batch)"
    )
    embedding_dim: int = Field(default=8, ge=1, le=1024, description="wide_deep: width of the deep embedding")
    shuffle: bool = Field(default=True, description="shuffle row-group order and rows within a row group per epoch")

    @model_validator(mode="after")
    def _hlf_only_for_inclusive(self) -> TrainKerasParams:
        if self.hlf_col is not None and self.architecture != "inclusive":
            raise ValueError(f"hlf_col applies to architecture 'inclusive' only, not {self.architecture!r}")
        return self

    @property
    def features(self) -> str:
        """The feature column (the sequence column for ``inclusive``)."""
        return self.features_col or DEFAULT_FEATURES[self.architecture]

    @property
    def label(self) -> str:
        """The label column."""
        return self.label_col or DEFAULT_LABELS[self.architecture]

    @property
    def hlf(self) -> str | None:
        """``inclusive``: the HLF column; otherwise None."""
        if self.architecture != "inclusive":
            return None
        return self.hlf_col or "HLF_input"

    @property
    def input_columns(self) -> list[str]:
        """Every feature column the model reads, in model-input order."""
        return [self.features] + ([self.hlf] if self.hlf else [])

    @property
    def task(self) -> Literal["binary", "multiclass"]:
        """binary (sigmoid, binary cross-entropy) or multiclass (softmax, categorical cross-entropy)."""
        return "binary" if self.architecture in BINARY_ARCHITECTURES else "multiclass"


register(
    KindDef(
        name="train_keras",
        params=TrainKerasParams,
        function="dagspec.stages.train_keras:train_keras",
        version="1",
        description="Train a Keras classifier (hlf_dense, particle_gru, inclusive, logistic, wide_deep), "
        "streaming Parquet batches; workers >= 2 train data-parallel over Spark barrier tasks.",
        inputs={"train": InputRole(), "validation": InputRole(required=False)},
        outputs={"model": IOType.FILES},
    )
)
