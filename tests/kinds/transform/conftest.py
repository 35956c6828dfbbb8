"""Fixtures of the sql kind's tests: a classic session and a Spark Connect client of the same JVM."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def connect(spark: Any) -> Iterator[Any]:
    """A Spark Connect client of a Connect service in the test session's JVM."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    jvm = spark._jvm
    conf = jvm.org.apache.spark.SparkEnv.get().conf()
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", str(port))
    service = jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(spark._jsc.sc())
    client = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").create()
    yield client
    client.stop()
    service.stop(jvm.scala.Option.apply(None), jvm.scala.Option.apply(None))


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest, spark: Any) -> Any:
    return spark if request.param == "classic" else request.getfixturevalue("connect")
