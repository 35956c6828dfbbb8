"""Partitions in a spec: what a pipeline is partitioned by, and the windows its readers take.

A spec declares its partitions once (``partitions:``): a file per partition, found by a glob whose
``{name}`` part (or, without one, the file's name up to its first dot) is the partition's key, or
a declared list of keys. Stages marked ``partitioned: true`` process and checkpoint each partition
on its own; a stage that is not partitioned reads every partition of a partitioned stage, or a
window of them (``{stage: hashed, last: 7}``). Keys are ordered naturally (``day_2`` before
``day_10``); a window counts in that order. What is Airflow's and what is dagspec's:
docs/spec.md, "Partitions".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

PARTITION_KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]*$"
MAX_PARTITION_KEY_LENGTH = 200
PARTITIONS_PARAM = "partitions"  # run param of a partitioned spec: which partitions a run may compute
_CAPTURE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PartitionsSpec(BaseModel):
    """What the pipeline is partitioned by: files (one per partition) or declared keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: str | None = Field(
        default=None,
        description="a glob (may be a template): each file it matches is one partition; its key is the part the "
        "glob's `{name}` matches (data/day_{day}.tsv), else the file's name up to its first dot",
    )
    values: list[str | int] | None = Field(
        default=None, description="declared partition keys (instead of files): {{ partition.key }} in params"
    )
    of: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="a stage whose files output holds the files: a relative `files` glob is listed in its committed "
        "folder (the day files a generate stage wrote); an absolute one as it is",
    )
    parallel: int = Field(default=2, ge=1, le=64, description="partitions a stage computes at once (one task)")

    @model_validator(mode="after")
    def _one_source(self) -> PartitionsSpec:
        if (self.files is None) == (self.values is None):
            raise ValueError("give either `files` (a glob, one partition per file) or `values` (the keys)")
        if self.of is not None and self.files is None:
            raise ValueError("`of` names the stage whose files `files` lists: give `files` too")
        if self.files is not None and len(_CAPTURE.findall(self.files)) > 1:
            raise ValueError(f"`files` may capture one part ({{name}}), got {self.files!r}")
        for value in self.values or []:
            check_key(str(value))
        return self

    @property
    def capture(self) -> str | None:
        """The name of the glob's captured part, if it has one."""
        found = _CAPTURE.search(self.files or "")
        return found.group(1) if found else None


class PartitionWindow(BaseModel):
    """An input that reads some partitions of a partitioned stage: the newest ``last``, after leaving
    out the newest ``skip_last``, within ``from``..``to`` (keys, inclusive)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    stage: str = Field(
        pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$", description="'stage' or 'stage.output' of a partitioned stage"
    )
    last: int | None = Field(default=None, ge=1, description="the newest N partitions (after skip_last)")
    skip_last: int = Field(default=0, ge=0, description="leave out the newest N partitions first (a test day)")
    from_: str | None = Field(default=None, alias="from", description="the first key read (inclusive)")
    to: str | None = Field(default=None, description="the last key read (inclusive)")

    def select(self, keys: Sequence[str], run_key: str | None = None) -> list[str]:
        """The keys this window reads of ``keys`` (naturally ordered), relative to the run's key."""
        chosen = [k for k in order_keys(keys) if run_key is None or natural(k) <= natural(run_key)]
        chosen = [k for k in chosen if (self.from_ is None or natural(k) >= natural(self.from_))]
        chosen = [k for k in chosen if (self.to is None or natural(k) <= natural(self.to))]
        if self.skip_last:
            chosen = chosen[: -self.skip_last]
        return chosen[-self.last :] if self.last else chosen

    def describe(self) -> str:
        """``last 7 of hashed`` and the like, for messages."""
        parts = [f"last {self.last}" if self.last else "all"]
        if self.skip_last:
            parts.append(f"skipping the newest {self.skip_last}")
        if self.from_ or self.to:
            parts.append(f"keys {self.from_ or '...'}..{self.to or '...'}")
        return f"{', '.join(parts)} of {self.stage}"


def check_key(key: str) -> str:
    """A partition key names a folder and an Airflow partition: a short, path-safe name."""
    if not re.match(PARTITION_KEY_PATTERN, key) or len(key) > MAX_PARTITION_KEY_LENGTH or ".." in key:
        raise ValueError(
            f"partition key {key!r} must match {PARTITION_KEY_PATTERN} (at most {MAX_PARTITION_KEY_LENGTH} "
            "characters, no '..'): it names the partition's checkpoint folder"
        )
    return key


def natural(key: str) -> tuple[Any, ...]:
    """Sort key: digits compare as numbers (``day_2`` < ``day_10``), the rest as text."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", key) if part)


def order_keys(keys: Sequence[str]) -> list[str]:
    """Keys in natural order."""
    return sorted(keys, key=natural)


def glob_of(files: str) -> str:
    """The glob that lists a `files` pattern's partitions (its ``{name}`` part as ``*``)."""
    return _CAPTURE.sub("*", files)


def key_of(files: str, path: str) -> str | None:
    """The partition key of a file the pattern's glob matched: its captured part, else its name up
    to the first dot; None when the captured part does not match (another file of the glob)."""
    name = _CAPTURE.search(files)
    if name is None:
        return path.rsplit("/", 1)[-1].split(".", 1)[0]
    head, tail = files[: name.start()], files[name.end() :]
    pattern = _glob_regex(head.rsplit("/", 1)[-1]) + "(?P<key>[^/]+?)" + _glob_regex(tail)
    found = re.search(pattern + "$", path)
    return found.group("key") if found else None


def _glob_regex(text: str) -> str:
    out = []
    for char in text:
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
    return "".join(out)


def parse_scope(text: str | None) -> tuple[str | None, str | None] | None:
    """The run param ``partitions``: ``A..B`` (either end may be empty), or one key ``A`` (= ``A..A``);
    None or '' for every partition."""
    if text is None or not str(text).strip():
        return None
    first, dots, last = str(text).strip().partition("..")
    if not dots:
        return first, first
    return (first.strip() or None), (last.strip() or None)


def in_scope(key: str, scope: tuple[str | None, str | None] | None) -> bool:
    """Is ``key`` within a run's scope (None: every key)?"""
    if scope is None:
        return True
    low, high = scope
    return (low is None or natural(key) >= natural(low)) and (high is None or natural(key) <= natural(high))
