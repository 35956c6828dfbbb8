"""Which stages run as Spark Connect clients and which keep a driver of their own, and why."""

from __future__ import annotations

from dagspec.kinds.catalog import load_catalog
from dagspec.plan.modes import CONNECT, SUBMIT, driver_only_conf, execution_mode, is_session_conf
from tests.conftest import REPO


def test_a_spark_connection_submits_every_stage() -> None:
    read = load_catalog(REPO).get("read")
    assert read is not None
    mode = execution_mode(read, {}, "spark", "spark_default")
    assert (mode.mode, mode.reason) == (SUBMIT, "connection 'spark_default' is of type 'spark'")


def test_under_connect_only_the_kinds_that_need_a_driver_are_submitted() -> None:
    catalog = load_catalog(REPO)
    modes = {d.name: execution_mode(d, {}, "spark_connect", "c").mode for d in catalog.all()}
    own = sorted(name for name, mode in modes.items() if mode == SUBMIT)
    assert own == ["train_keras", "train_spark_ml", "train_xgboost"]
    assert modes["read"] == modes["evaluate"] == modes["undersample"] == CONNECT


def test_result_changing_conf_that_no_session_can_set_needs_a_driver() -> None:
    read = load_catalog(REPO).get("read")
    assert read is not None
    conf = {
        "spark.sql.ansi.enabled": "true",  # a session setting
        "spark.executor.memory": "4g",  # resources: the server's apply
        "spark.sql.extensions": "x.Ext",  # static: read when a driver starts
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    }
    assert is_session_conf("spark.sql.ansi.enabled") and not is_session_conf("spark.sql.extensions")
    assert driver_only_conf(conf) == ["spark.serializer", "spark.sql.extensions"]
    mode = execution_mode(read, conf, "spark_connect", "c")
    assert mode.mode == SUBMIT and "spark.serializer, spark.sql.extensions" in mode.reason
