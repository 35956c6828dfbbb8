"""Creating SparkSessions: the only module that does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def create_session(
    app_name: str, *, master: str | None = None, remote: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A session: a Spark Connect client of ``remote`` when given, else a classic driver.

    Inside spark-submit the master and conf come from its command line. A Connect client gets
    ``conf`` set on its own session (only session settings: see ``dagspec.plan.modes``).
    """
    from pyspark.sql import SparkSession

    if remote is not None:
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session = SparkSession.builder.remote(remote).getOrCreate()
        # pyspark's default retries an unreachable server for about ten minutes; a stage fails in
        # ~10 s instead, and Airflow's retry (which restarts dagspec's local server) takes over
        session.client.set_retry_policies([DefaultPolicy(max_retries=6, max_backoff=4000)])
        for key, value in (conf or {}).items():
            session.conf.set(key, value)
        return session
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    return builder.getOrCreate()
