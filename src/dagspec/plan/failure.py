"""Why a stage attempt failed, as one line that says what failed and where, first.

The stage entry (``dagspec.job.main``) turns the exception that ended a stage into a
:class:`StageFailure` (the root cause: Spark's error class and message, a Python exception and its
last frame in stage code, out of memory, a lost worker). It crosses the process boundary twice:

- as one marker line (``DAGSPEC-STAGE-FAILURE {json}``) in the job's output, which the operator
  (Connect client) and ``dagspec run`` (the run log) find again, never by reading Java traces;
- as ``<stage_dir>/_failed-<fingerprint>.json``, the record of the failed attempt (the operator
  reads it after spark-submit; ``dagspec gc`` removes it once the fingerprint is committed or
  unreached). It is no checkpoint: nothing but this module reads it.

:func:`failure_line` adds the spec's positions: ``stage 'enriched' (pipelines/x.yaml:12:3, kind
sql) failed: [PARSE_SYNTAX_ERROR] ... in stages.enriched.params.query (pipelines/x.yaml:13:14)``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from dagspec import storage
from dagspec.checkpoint import FAILED_PREFIX
from dagspec.spec.models import PipelineSpec

MARKER = "DAGSPEC-STAGE-FAILURE "


@dataclass(frozen=True)
class StageFailure:
    """The root cause of one failed stage attempt; ``param`` names the param it comes from, if known."""

    stage: str
    kind: str
    cause: str
    param: str = ""

    def marker_line(self) -> str:
        """The one line the job prints so that the processes above it find the failure."""
        return MARKER + json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> StageFailure:
        return cls(str(data["stage"]), str(data["kind"]), str(data["cause"]), str(data.get("param") or ""))


def find_failures(lines: Iterable[str]) -> list[StageFailure]:
    """Every distinct failure marker in ``lines``, in order (a log line may carry a prefix:
    timestamps, logger names)."""
    found: list[StageFailure] = []
    for line in lines:
        at = line.find(MARKER)
        if at < 0:
            continue
        with contextlib.suppress(ValueError, KeyError, TypeError):
            # raw_decode: a log handler may append its own fields after the JSON object
            failure = StageFailure.from_dict(json.JSONDecoder().raw_decode(line[at + len(MARKER) :])[0])
            if failure not in found:
                found.append(failure)
    return found


def find_failure(lines: Iterable[str]) -> StageFailure | None:
    """The last failure marker in ``lines``."""
    found = find_failures(lines)
    return found[-1] if found else None


def failure_line(spec: PipelineSpec | None, failure: StageFailure) -> str:
    """The one line a user sees first: the stage, where the spec defines it, its kind, the cause."""
    written = spec.written_stage(failure.stage) if spec is not None else failure.stage
    if spec is None or written not in spec.stages:
        return f"stage {failure.stage!r} (kind {failure.kind}) failed: {failure.cause}"
    line, col = spec.position(("stages", written), prefer_key=True)
    text = f"stage {failure.stage!r} ({spec.source}:{line}:{col}, kind {failure.kind}) failed: {failure.cause}"
    if failure.param and failure.param in spec.stages[written].params:
        p_line, p_col = spec.position(("stages", written, "params", failure.param))
        text += f" in stages.{written}.params.{failure.param} ({spec.source}:{p_line}:{p_col})"
    return text


def record_path(stage_dir: str, fingerprint: str) -> str:
    """Where the failed attempt of a fingerprint is recorded."""
    return f"{stage_dir}/{FAILED_PREFIX}{fingerprint}.json"


def write_record(stage_dir: str, fingerprint: str, failure: StageFailure, line: str = "") -> None:
    """Record the failed attempt (``line``: the located first line, once known)."""
    record = {**asdict(failure), "fingerprint": fingerprint, "failed": datetime.now(UTC).isoformat()}
    if line:
        record["line"] = line
    storage.write_text(record_path(stage_dir, fingerprint), json.dumps(record, indent=2) + "\n")


def read_record(stage_dir: str, fingerprint: str) -> StageFailure | None:
    """The recorded failure of a fingerprint's last failed attempt, if any."""
    text = storage.read_text(record_path(stage_dir, fingerprint))
    if text is None:
        return None
    try:
        return StageFailure.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None


def clear_record(stage_dir: str, fingerprint: str) -> None:
    """Forget a previous attempt's failure (before a new attempt starts)."""
    storage.delete(record_path(stage_dir, fingerprint))
