"""Params models and registrations of every stage kind (pydantic only: no Spark here)."""

from dagspec.kinds import (
    ctr,  # noqa: F401
    evaluation,  # noqa: F401
    generic,  # noqa: F401  (registers on import)
    physics,  # noqa: F401
    train,  # noqa: F401
)
