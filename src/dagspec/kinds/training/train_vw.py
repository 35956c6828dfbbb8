"""Kind ``train_vw``: Vowpal Wabbit logistic regression on hashed namespaces, streamed from Parquet.

The stage's own process reads the committed Parquet shards of its input with pyarrow, one file
and one record batch (``batch_rows``) at a time, turns each batch into VW example lines
(``vw_lines``) and feeds them to one ``vowpalwabbit.Workspace``: the data never sits in memory
whole and no row passes through Spark. VW hashes the feature names into ``2^bits`` weights itself,
so the raw columns (``ctr_features`` as_is, or the Criteo columns as read) are its natural input.

``passes > 1`` streams the files again through the same online learner (without VW's holdout or
learning-rate decay between passes, which belong to its own file reader); after every pass but
the last the model is saved atomically into the stage's scratch directory, and a rerun of a
killed attempt of the same fingerprint continues from the last saved pass (VW saves its
optimizer state with the weights).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from dagspec.errors import StageFailedError
from dagspec.kinds.base import FILES, TABLE, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.ctr.columns import CRITEO_CATEGORICAL_COLUMNS, CRITEO_INTEGER_COLUMNS
from dagspec.kinds.model_card import ModelCard, VWNamespace, training_data

log = logging.getLogger("dagspec.stage")
ARTIFACT = "model.vw"
_PASS_FILE = re.compile(r"^pass-(?P<n>[0-9]+)\.vw$")
CRITEO_NAMESPACES = [
    VWNamespace(name="i", columns=CRITEO_INTEGER_COLUMNS, values="numeric", log1p=True),
    VWNamespace(name="c", columns=CRITEO_CATEGORICAL_COLUMNS, values="categorical"),
]


class TrainVWParams(StageParams):
    """Vowpal Wabbit binary classifier (logistic loss, logistic link) on hashed namespaces.

    The default namespaces are the Criteo columns: ``i`` the integers I1..I13 (log1p of positive
    values), ``c`` the categoricals C1..C26 as ``Cj_value`` tokens. Every other knob is VW's option
    of the same meaning (``-b``, ``-l``, ``--power_t``, ``--l1``, ``--l2``, ``--interactions``).
    """

    label_col: str = "label"
    namespaces: list[VWNamespace] = Field(
        default_factory=lambda: list(CRITEO_NAMESPACES),
        min_length=1,
        description="the example's namespaces: name, columns, values numeric | categorical, log1p",
    )
    bits: int = Field(default=22, ge=1, le=30, description="-b: 2^bits hashed weights shared by every namespace")
    learning_rate: float = Field(default=0.3, gt=0, description="-l (the benchmark's tuned 0.3)")
    power_t: float = Field(default=0.5, ge=0, description="--power_t: the learning rate's decay exponent")
    l1: float = Field(default=0.0, ge=0, description="--l1 regularization")
    l2: float = Field(default=0.0, ge=0, description="--l2 regularization")
    interactions: list[str] = Field(
        default_factory=list, description="--interactions: namespace pairs by first letter, e.g. ['ic', 'cc']"
    )
    passes: int = Field(
        default=1, ge=1, le=100, description="reads of the training data (the model is saved after each)"
    )
    batch_rows: int = Field(default=65536, ge=1, description="rows per Arrow record batch read from Parquet")

    @field_validator("interactions")
    @classmethod
    def _pairs(cls, value: list[str]) -> list[str]:
        bad = [pair for pair in value if not re.fullmatch(r"[A-Za-z]{2,3}", pair)]
        if bad:
            raise ValueError(f"interactions are 2 or 3 namespace letters each (e.g. 'ic'), got {bad}")
        return value

    @model_validator(mode="after")
    def _interactions_name_namespaces(self) -> TrainVWParams:
        letters = {namespace.name[0] for namespace in self.namespaces}
        unknown = sorted({c for pair in self.interactions for c in pair} - letters)
        if unknown:
            raise ValueError(
                f"interactions name namespaces {unknown} that namespaces do not define ({sorted(letters)})"
            )
        return self

    def vw_args(self) -> list[str]:
        """The Workspace's command line (a model loaded with ``-i`` keeps these)."""
        args = ["--loss_function", "logistic", "--link", "logistic", "--quiet"]
        args += ["-b", str(self.bits), "-l", repr(self.learning_rate), "--power_t", repr(self.power_t)]
        if self.l1:
            args += ["--l1", repr(self.l1)]
        if self.l2:
            args += ["--l2", repr(self.l2)]
        for pair in self.interactions:
            args += ["--interactions", pair]
        return args


@kind(
    "train_vw",
    params=TrainVWParams,
    inputs={"train": TABLE},
    outputs={"model": FILES},
    driver="process",
    driver_reason="trains in its own process from the Parquet shards (pyarrow batches into VW)",
)
def train_vw(inputs: Inputs, params: TrainVWParams, ctx: StageContext) -> Outputs:
    """Vowpal Wabbit, streamed from the train table's Parquet files; resumes from the last saved pass.

    Writes ``model/model.vw`` (VW's own model file) and ``model/model.json``.
    """
    import pyarrow.parquet as pq

    from dagspec.kinds.quality.labels import require_labels
    from dagspec.kinds.training.resources import ResourceMonitor
    from dagspec.kinds.training.vw_lines import check_namespaces, namespace_columns
    from dagspec.kinds.training.xgboost_data import parquet_files

    train = inputs.table("train")
    if params.label_col not in train.columns:
        raise StageFailedError(f"no label column {params.label_col!r} in the training data (columns: {train.columns})")
    train_path = ctx.input_path("train")
    if train_path is None:  # a required role: the spec cannot leave it out
        raise StageFailedError("train_vw: the train input is not wired")
    files = parquet_files(train_path)
    check_namespaces(params.namespaces, pq.read_schema(files[0]), params.label_col)
    require_labels(train, params.label_col, [0, 1], who="train_vw", role="train")
    scratch = ctx.scratch_dir("vw")
    checkpoint, done = last_pass(scratch, params.passes)
    if done:
        log.info("resuming Vowpal Wabbit after pass %d of %d", done, params.passes)
    out = ctx.local_output_dir("model")
    with ResourceMonitor() as monitor:
        progress = _train(files, params, scratch, checkpoint, done, out / ARTIFACT)
    resources = monitor.summary()
    card = ModelCard(
        flavor="vw",
        kind="train_vw",
        artifact=ARTIFACT,
        label_col=params.label_col,
        input_columns=namespace_columns(params.namespaces),
        classes=[0, 1],
        task="binary",
        params={"args": params.vw_args(), "passes": params.passes, "batch_rows": params.batch_rows},
        trained_on=training_data(ctx, ("train",)),
        metrics={"average_logloss": progress["average_logloss"]},
        namespaces=params.namespaces,
        rows_learned=progress["rows_learned"],
        resumed_from_pass=done,
        **resources,
    )
    card.write(out)
    ctx.metrics.update(
        {
            **progress,
            "resumed_from_pass": done,
            "passes": params.passes,
            **{k: v for k, v in resources.items() if k != "resource_scope"},
        }
    )
    return {}


def last_pass(scratch: Path, passes: int) -> tuple[Path | None, int]:
    """The model a killed attempt saved after its last finished pass, and that pass (None, 0 without one)."""
    saved = [(int(m["n"]), p) for p in scratch.glob("pass-*.vw") if (m := _PASS_FILE.match(p.name))]
    saved = [(n, p) for n, p in saved if n < passes]
    if not saved:
        return None, 0
    n, path = max(saved)
    return path, n


def _train(
    files: list[str], params: TrainVWParams, scratch: Path, checkpoint: Path | None, done: int, artifact: Path
) -> dict[str, Any]:
    """Stream every pass left through one Workspace; save per pass and at the end."""
    import pyarrow.parquet as pq
    from vowpalwabbit import Workspace

    from dagspec.kinds.training.vw_lines import example_lines, namespace_columns

    columns = [params.label_col, *namespace_columns(params.namespaces)]
    args = params.vw_args() + (["-i", str(checkpoint)] if checkpoint is not None else [])
    workspace = Workspace(arg_list=args)
    rows = 0
    try:
        for number in range(done + 1, params.passes + 1):
            for file in files:
                for batch in pq.ParquetFile(file).iter_batches(batch_size=params.batch_rows, columns=columns):
                    for line in example_lines(batch, params.namespaces, params.label_col):
                        workspace.learn(line)
                    rows += batch.num_rows
            if number < params.passes:
                _save(workspace, scratch / f"pass-{number}.vw")
        _save(workspace, artifact)
        examples = workspace.get_weighted_examples()
        # VW's average loss over this attempt's examples, each scored before it is learned (a
        # progressive validation on the first pass; later passes score examples seen before)
        loss = workspace.get_sum_loss() / examples if examples else None
    finally:
        workspace.finish()
    return {"rows_learned": rows, "average_logloss": loss}


def _save(workspace: Any, path: Path) -> None:
    """VW's model file, written beside ``path`` and renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    workspace.save(str(tmp))
    os.replace(tmp, path)
