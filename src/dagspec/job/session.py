"""Creating SparkSessions: the only module that does."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def create_session(app_name: str, *, master: str | None = None) -> SparkSession:
    """A session; inside spark-submit the master and conf come from its command line."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    return builder.getOrCreate()
