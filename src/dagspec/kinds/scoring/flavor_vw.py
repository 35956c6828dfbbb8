"""Inference flavor ``vw`` (see ``dagspec.kinds.scoring.flavor_base`` for the contract).

The VW model file travels as a broadcast of its bytes and is loaded at most once per Python worker
(written to a temporary file: VW reads models from files only), in test mode (``-t``). Rows are
scored through a SCALAR_ITER Arrow UDF over the namespaces' columns only: each Arrow batch becomes
VW example lines with ``vw_lines``, the builder ``train_vw`` trains with, in slices of
``batch_size`` rows. The model's logistic link makes a prediction P(click).
"""

from __future__ import annotations

import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagspec.kinds.scoring.flavor_base import numpy_to_probability, with_prediction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql import DataFrame

    from dagspec.kinds.scoring.flavor_base import Scoring, Shipped

DEFAULT_BATCH_SIZE = 8192
_LOCK = threading.Lock()
_WORKSPACE: dict[str, Any] = {}


def transform(scoring: Scoring) -> DataFrame:
    """``keep_cols`` + ``probability`` ([P(0), P(1)]) + ``prediction``; lines built ``batch_size`` rows at a time."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

    from dagspec.kinds.training.vw_lines import namespace_columns

    namespaces = scoring.card.vw_namespaces()
    columns = scoring.input_columns(namespace_columns(namespaces))
    rows_per_call = scoring.batch_size or DEFAULT_BATCH_SIZE
    blob, digest = scoring.artifact()

    def score(batches: Iterator[Any]) -> Iterator[pa.Array]:
        import numpy as np
        import pyarrow as pa

        from dagspec.kinds.training.vw_lines import example_lines

        workspace = _load(blob, digest)
        for batch in batches:
            arrays = batch if isinstance(batch, tuple) else (batch,)
            rows = len(arrays[0])
            p1 = np.empty(rows, dtype=np.float64)
            for start in range(0, rows, rows_per_call):
                table = pa.table([a.slice(start, rows_per_call) for a in arrays], names=columns)
                lines = example_lines(table, namespaces)
                p1[start : start + len(lines)] = [workspace.predict(line) for line in lines]
            yield numpy_to_probability(p1, 2)

    with warnings.catch_warnings():  # pyspark prefers type hints; the explicit type is clearer here
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(score, "array<double>", ArrowUDFType.SCALAR_ITER)
    return with_prediction(scoring.df, scoring.keep_cols, udf(*[F.col(c) for c in columns]), scoring.card.classes)


def _load(blob: Broadcast[bytes] | Shipped, digest: str) -> Any:
    """The VW workspace for this model file, loaded at most once per Python worker."""
    from vowpalwabbit import Workspace

    with _LOCK:
        if digest not in _WORKSPACE:
            for old in _WORKSPACE.values():  # a worker serving a new model drops the old one
                old.finish()
            _WORKSPACE.clear()
            with tempfile.TemporaryDirectory(prefix="dagspec-vw-") as tmp:
                path = Path(tmp) / "model.vw"
                path.write_bytes(blob.value)
                _WORKSPACE[digest] = Workspace(arg_list=["-i", str(path), "-t", "--quiet"])
        return _WORKSPACE[digest]
