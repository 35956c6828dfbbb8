"""Which stages run as Spark Connect clients and which keep a driver of their own, and why."""

from __future__ import annotations

import pytest

from dagspec.kinds.catalog import load_catalog
from dagspec.plan.modes import (
    CONNECT,
    LOCAL_SERVER_EXTRA,
    SUBMIT,
    driver_only_conf,
    execution_mode,
    is_driver_here,
    is_server_on_this_machine,
    is_session_conf,
)
from dagspec.spec.safety import ALLOWED_RESOURCE_CONF, ALLOWED_RESULT_CONF
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
    assert own == ["train_keras", "train_spark_ml", "train_vw", "train_xgboost"]  # params unknown: the strictest
    assert modes["read"] == modes["evaluate"] == modes["undersample"] == CONNECT


def test_single_node_training_is_a_client_of_a_server_on_this_machine_only() -> None:
    catalog = load_catalog(REPO)
    keras, xgb, spark_ml = (catalog.get(name) for name in ("train_keras", "train_xgboost", "train_spark_ml"))
    assert keras is not None and xgb is not None and spark_ml is not None
    one = keras.params.model_validate({"architecture": "hlf_dense"})
    two = keras.params.model_validate({"architecture": "hlf_dense", "workers": 2})
    here = execution_mode(keras, {}, "spark_connect", "c", params=one, server_on_this_machine=True)
    assert here.mode == CONNECT and "in the client process" in here.reason
    remote = execution_mode(keras, {}, "spark_connect", "c", params=one, server_on_this_machine=False)
    assert remote.mode == SUBMIT and "remote" in remote.reason
    # a remote server, but spark-submit would start the driver here too (client deploy mode): no JVM
    # and no idle executors for a process that trains here either way
    here_too = execution_mode(keras, {}, "spark_connect", "c", params=one, driver_here=True)
    assert here_too.mode == CONNECT and "would run too" in here_too.reason
    barrier = execution_mode(keras, {}, "spark_connect", "c", params=two, server_on_this_machine=True)
    assert barrier.mode == SUBMIT and "barrier" in barrier.reason
    sparkxgb = xgb.params.model_validate({"label_col": "label", "features_col": "f", "workers": 2})
    assert (
        "SparkXGB" in execution_mode(xgb, {}, "spark_connect", "c", params=sparkxgb, server_on_this_machine=True).reason
    )
    fit = spark_ml.params.model_validate({"model": "logistic_regression"})
    assert execution_mode(spark_ml, {}, "spark_connect", "c", params=fit, server_on_this_machine=True).mode == SUBMIT


def test_a_server_is_on_this_machine_when_dagspec_started_it_or_it_listens_on_loopback() -> None:
    assert is_server_on_this_machine("sc://10.0.0.9", {LOCAL_SERVER_EXTRA: True})
    assert is_server_on_this_machine("sc://127.0.0.1", {}) and is_server_on_this_machine("localhost", {})
    assert is_server_on_this_machine("sc://[::1]:15002", {})
    assert not is_server_on_this_machine("sc://10.0.0.9", {}) and not is_server_on_this_machine(None, {})
    assert not is_server_on_this_machine("local[*]", {})  # a spark connection's master


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


def test_a_driver_of_its_own_runs_here_unless_the_submit_connection_asks_for_cluster_mode() -> None:
    assert is_driver_here(None)  # no submit connection
    assert is_driver_here({}) and is_driver_here({"deploy-mode": "client"})
    assert not is_driver_here({"deploy-mode": "cluster", "namespace": "spark"})


@pytest.mark.spark
def test_every_allowed_sql_key_is_a_setting_a_connect_session_may_change(spark) -> None:
    # a stage's spark.sql.* conf is set on its session of a running server: none may be static there
    allowed = [key for key, _ in ALLOWED_RESOURCE_CONF + ALLOWED_RESULT_CONF if "*" not in key]
    session_keys = [key for key in allowed if is_session_conf(key)]
    assert "spark.sql.shuffle.partitions" in session_keys and not spark.conf.isModifiable("spark.sql.warehouse.dir")
    assert [key for key in session_keys if not spark.conf.isModifiable(key)] == []
