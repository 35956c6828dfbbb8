"""The error classes dagspec raises; every user-facing failure is one of these."""

from __future__ import annotations

from dataclasses import dataclass


class DagspecError(Exception):
    """Root of every error dagspec raises on purpose."""


@dataclass(frozen=True)
class SpecIssue:
    """One problem in one spec file, located by line and column (1-based)."""

    file: str
    line: int
    column: int
    location: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.location}: {self.message}" if self.location else f"{where}: {self.message}"


class SpecError(DagspecError):
    """A spec file that cannot be used; carries every issue found in it, not just the first."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = sorted(issues, key=lambda i: (i.file, i.line, i.column))
        super().__init__("\n".join(str(i) for i in self.issues))


class YamlSourceError(SpecError):
    """The file is not acceptable YAML: syntax, duplicate keys, unsafe tags, too big."""


class SpecValidationError(SpecError):
    """The YAML is fine but a key, a type, a bound or a reference is wrong."""


class StageConfigError(DagspecError):
    """A stage's params, rendered at run time, fail its kind's model."""


class StorageError(DagspecError):
    """A path escapes the storage root or a checkpoint is unusable."""


class ConnectionMissingError(DagspecError):
    """The Airflow connection a pipeline relies on does not exist."""


class StageFailedError(DagspecError):
    """A stage ran but its own checks failed (too many rejected rows, too few slots, ...)."""
