"""Params models and registrations of every stage kind (pydantic only: no Spark here)."""

from dagspec.kinds import generic  # noqa: F401  (registers on import)
from dagspec.kinds import train  # noqa: F401
from dagspec.kinds import ctr  # noqa: F401
from dagspec.kinds import physics  # noqa: F401
