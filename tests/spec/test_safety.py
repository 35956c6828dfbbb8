"""The trust boundary in the spec: no shell from sql, only allowlisted Spark conf, no templated conf."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dagspec.errors import StageConfigError
from dagspec.kinds.transform.sql import refused_sql
from dagspec.plan.fingerprint import RESOURCE_ONLY_CONF, conf_key_in, result_conf
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from dagspec.spec.safety import (
    ALLOWED_CONF_ENV,
    ALLOWED_RESOURCE_CONF,
    ALLOWED_RESULT_CONF,
    is_on_allowlist,
    refusal,
)
from tests.conftest import REPO
from tests.helpers import spec_issues, write_spec

TRANSFORM = "script transforms (TRANSFORM/MAP/REDUCE ... USING '<command>') run a shell command on every executor and are refused; use Spark SQL functions, or a kind of your own (docs/security.md)"


def issues(tmp_path: Path, text: str) -> list[str]:
    return spec_issues(tmp_path, text, "unsafe.yaml")


def test_sql_script_transforms_and_commands_are_refused_at_validate(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        """
        stages:
          shell:
            kind: sql
            params: {query: "SELECT TRANSFORM(a) USING 'sh -c id' AS (out) FROM t"}
          jar: {kind: sql, params: {query: "ADD JAR /tmp/evil.jar"}}
          java: {kind: sql, params: {query: "select java_method('java.lang.Runtime', 'getRuntime')"}}
          two: {kind: sql, params: {query: "select 1; set spark.sql.ansi.enabled=false"}}
        """,
    )
    assert found == [
        f"pipelines/unsafe.yaml:4:21: stages.shell.params.query: {TRANSFORM} "
        """(got "SELECT TRANSFORM(a) USING 'sh -c id' AS (out) FROM t")""",
        "pipelines/unsafe.yaml:5:36: stages.jar.params.query: a sql stage runs one query (starting with SELECT, "
        "WITH, FROM, VALUES, TABLE); this one starts with ADD (got 'ADD JAR /tmp/evil.jar')",
        "pipelines/unsafe.yaml:6:37: stages.java.params.query: java_method() calls Java methods by reflection and "
        """is refused (docs/security.md) (got "select java_method('java.lang.Runtime', 'getRuntime')")""",
        "pipelines/unsafe.yaml:7:36: stages.two.params.query: a sql stage runs one query: remove the ';' and what "
        "follows (got 'select 1; set spark.sql.ansi.enabled=false')",
    ]


def test_a_rendered_query_is_checked_again(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        """
        params: {q: {type: string, default: "select 1 as x"}}
        stages:
          q: {kind: sql, params: {query: "{{ params.q }}"}}
        """,
    )
    spec = load_spec(path)  # a template: checked once rendered
    resolve_pipeline(spec, default_context(spec, {}))
    with pytest.raises(StageConfigError, match=r"stages\.q\.params\.query: .*script transforms"):
        resolve_pipeline(spec, default_context(spec, {"q": "select transform(x) using 'rm -rf /' from t"}))


@pytest.mark.parametrize(
    "query",
    [
        "select transform(arr, x -> x + 1) as y from t",  # the higher-order function is fine
        "select * from a join b using (id) where note = 'it''s'",
        "with q as (select 1 as x) select x from q",
        "(select 'a;b' as s) union all (select 'c')",
        "select /* using 'x' */ 1 -- ; drop",
        "select inserted_at, `insert into` from t where note = 'insert into x'",
    ],
)
def test_ordinary_queries_pass(query: str) -> None:
    assert refused_sql(query) is None


def test_conf_keys_off_the_allowlist_and_templated_values_are_refused_at_their_line(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        """
        spark:
          conf:
            spark.pyspark.python: /bin/sh
            spark.driver.extraJavaOptions: "-XX:OnOutOfMemoryError=curl evil"
            spark.sql.shuffle.partitions: 8
            spark.app.note: x
        stages:
          q:
            kind: sql
            params: {query: select 1}
            spark:
              conf: {spark.executorEnv.LD_PRELOAD: /tmp/x.so, spark.sql.session.timeZone: "{{ conn.x.password }}"}
        """,
    )
    hatch = "an administrator can allow it with DAGSPEC_ALLOWED_CONF, outside the spec (docs/security.md)"
    assert found == [
        f"pipelines/unsafe.yaml:3:5: spark.conf.spark.pyspark.python: 'spark.pyspark.python' is refused: it starts "
        f"this program; {hatch}",
        "pipelines/unsafe.yaml:4:5: spark.conf.spark.driver.extraJavaOptions: 'spark.driver.extraJavaOptions' is "
        f"refused: it injects JVM options (-javaagent, -XX:OnOutOfMemoryError=<command>, ...); {hatch}",
        "pipelines/unsafe.yaml:6:5: spark.conf.spark.app.note: 'spark.app.note' is not on the allowlist of Spark "
        f"conf a spec may set; {hatch}",
        "pipelines/unsafe.yaml:12:14: stages.q.spark.conf.spark.executorEnv.LD_PRELOAD: 'spark.executorEnv.LD_PRELOAD' "
        f"is refused: it sets environment variables of Spark's processes (PYSPARK_PYTHON, LD_PRELOAD, ...); {hatch}",
        "pipelines/unsafe.yaml:12:83: stages.q.spark.conf.spark.sql.session.timeZone: conf values are not templates "
        "('{{ conn.x.password }}'); nothing renders them, and a secret belongs in an Airflow connection "
        "(docs/security.md)",
    ]


def test_an_administrator_allows_keys_outside_the_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
        spark: {conf: {spark.jars.packages: "io.delta:delta-spark_2.13:4.0.0", spark.sql.extensions: x.Y}}
        stages: {q: {kind: sql, params: {query: select 1}, spark: {conf: {spark.sql.caseSensitive: true}}}}
        """
    assert len(issues(tmp_path, text)) == 3
    monkeypatch.setenv(ALLOWED_CONF_ENV, "spark.jars.packages, SPARK.SQL.EXTENSIONS,spark.sql.case*")
    spec = load_spec(write_spec(tmp_path, text, "allowed.yaml"))
    assert spec.spark.conf["spark.sql.extensions"] == "x.Y"
    assert spec.stages["q"].spark is not None and spec.stages["q"].spark.conf == {"spark.sql.caseSensitive": True}
    assert refusal("spark.sql.execution.pyspark.python") is not None  # only what the administrator named


# accepted before the allowlist; each starts a program, loads code or changes how SQL text parses
FORMER_HOLES = [
    "spark.sql.execution.pyspark.python",
    "spark.sql.hive.metastore.jars",
    "spark.sql.hive.metastore.jars.path",
    "spark.sql.catalog.evil",
    "spark.sql.catalog.spark_catalog",
    "spark.hadoop.fs.s3a.impl",
    "spark.hadoop.fs.file.impl",
    "spark.serializer",
    "spark.kryo.registrator",
    "spark.shuffle.manager",
    "spark.sql.sources.commitProtocolClass",
    "spark.sql.ansi.doubleQuotedIdentifiers",
]


@pytest.mark.parametrize(
    "key",
    [
        *FORMER_HOLES,
        "spark.pyspark.driver.python",
        "spark.executor.extraClassPath",
        "spark.yarn.am.extraJavaOptions",
        "spark.jars",
        "spark.submit.pyFiles",
        "spark.kubernetes.executor.podTemplateFile",
        "spark.executor.resource.gpu.discoveryScript",
        "spark.master",
        "spark.sql.adaptive.customCostEvaluatorClass",
        "spark.io.compression.codec",
        "spark.eventLog.dir",
        "spark.sql.warehouse.dir",
        "SPARK.SQL.EXECUTION.PYSPARK.PYTHON",
        "Spark.Hadoop.fs.s3a.impl",
        "spark.SERIALIZER",
        "SPARK.SQL.SHUFFLE.PARTITIONS",
        "spark.some.future.key",
    ],
)
def test_keys_off_the_allowlist_are_refused(key: str) -> None:
    assert not is_on_allowlist(key)
    assert refusal(key) is not None


def test_a_case_variant_is_refused_with_the_reason_of_its_key() -> None:
    assert refusal("SPARK.SQL.EXECUTION.PYSPARK.PYTHON") == (
        "'SPARK.SQL.EXECUTION.PYSPARK.PYTHON' is refused: it starts this program; an administrator can allow it "
        "with DAGSPEC_ALLOWED_CONF, outside the spec (docs/security.md)"
    )
    assert refusal("Spark.Sql.Shuffle.Partitions") == (
        "'Spark.Sql.Shuffle.Partitions' is not on the allowlist of Spark conf a spec may set (keys are "
        "case-sensitive: did you mean 'spark.sql.shuffle.partitions'?); an administrator can allow it with "
        "DAGSPEC_ALLOWED_CONF, outside the spec (docs/security.md)"
    )


def _conf_keys_in(text: str) -> set[str]:
    """Spark conf keys of every inline ``conf: {...}`` mapping of a spec in ``text``."""
    blocks = re.findall(r"conf: \{+([^}]*)\}", text)
    return {key for block in blocks for key in re.findall(r"(spark\.[\w.]+): ", block)}


def test_every_conf_key_the_shipped_pipelines_and_test_specs_use_is_allowed() -> None:
    shipped = {key for path in sorted((REPO / "pipelines").glob("*.yaml")) for key in load_spec(path).spark.conf}
    written = [*(REPO / "docs").glob("*.md"), *(REPO / "bench").glob("*.py"), *(REPO / "tests").rglob("*.py")]
    written += [*(REPO / "tests").rglob("*.yaml"), *(REPO / "plugins").rglob("*.yaml")]
    # files whose specs use refused keys on purpose, to see them refused
    probes = {"test_safety.py", "test_spec_errors_live.py"}
    used = {key for path in written if path.name not in probes for key in _conf_keys_in(path.read_text())}
    assert "spark.sql.shuffle.partitions" in shipped
    assert {"spark.executor.pyspark.memory", "spark.ui.enabled", "spark.sql.ansi.enabled"} <= used
    assert [key for key in sorted(shipped | used) if refusal(key) is not None] == []


def test_the_allowlist_agrees_with_the_cache_key() -> None:
    # a key the allowlist calls resource-only stays out of the fingerprint; every other is in it
    for pattern, why in ALLOWED_RESOURCE_CONF + ALLOWED_RESULT_CONF:
        assert why and refusal(pattern.replace("*", "maxExecutors")) is None, pattern
    resource = [p.replace("*", "maxExecutors") for p, _ in ALLOWED_RESOURCE_CONF]
    result = [p for p, _ in ALLOWED_RESULT_CONF]
    assert [key for key in resource if not conf_key_in(key, RESOURCE_ONLY_CONF)] == []
    assert [key for key in result if conf_key_in(key, RESOURCE_ONLY_CONF)] == []
    conf = {"spark.executor.pyspark.memory": "1g", "spark.sql.shuffle.partitions": "8", "spark.task.cpus": "2"}
    assert result_conf(conf) == {"spark.sql.shuffle.partitions": "8", "spark.task.cpus": "2"}


def test_dagspec_validate_names_the_file_line_and_key(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        """
        stages:
          q:
            kind: sql
            params: {query: select 1}
            spark:
              conf:
                spark.sql.shuffle.partitions: 4
                spark.sql.execution.pyspark.python: /tmp/evil.sh
        """,
        "hole.yaml",
    )
    env = {**os.environ, "DAGSPEC_HOME": str(REPO)}
    env.pop(ALLOWED_CONF_ENV, None)
    dagspec = Path(sys.executable).parent / "dagspec"
    done = subprocess.run([str(dagspec), "validate", str(path)], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"{path}:8:9: stages.q.spark.conf.spark.sql.execution.pyspark.python: 'spark.sql.execution.pyspark.python' "
        "is refused: it starts this program; an administrator can allow it with DAGSPEC_ALLOWED_CONF, outside the "
        "spec (docs/security.md)"
    )


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        (
            "with q as (select 1 as a) insert overwrite directory '/tmp/x' using parquet select * from q",
            "INSERT OVERWRITE",
        ),
        ("from t insert into x select *", "INSERT INTO"),
        ("with s as (select 1 as id) merge into x using s on x.id = s.id when matched then delete", "MERGE INTO"),
    ],
)
def test_writes_hidden_after_with_or_from_are_refused(query: str, refused: str) -> None:
    assert refused_sql(query) == (
        f"a sql stage returns a table and writes nothing: {refused} is refused (the stage's output is its "
        "query's result; export writes files)"
    )


def test_a_file_read_by_path_in_sql_is_refused_at_validate(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        """
        stages:
          raw: {kind: read, params: {format: csv, path: data.csv}}
          passwd:
            kind: sql
            inputs: {data: raw}
            params: {query: "SELECT * FROM data JOIN csv.`/etc/passwd` USING (id)"}
        """,
    )
    assert found == [
        "pipelines/unsafe.yaml:6:21: stages.passwd.params.query: csv.`/etc/passwd` reads a file by path; a stage "
        "reads only its inputs: add a read stage for it and name that stage in inputs: (got 'SELECT * FROM data "
        "JOIN csv.`/etc/passwd` USING (id)')"
    ]


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("select * from parquet.`/data/x`", "parquet.`/data/x` reads a file by path"),
        ("select * from JSON . `relative/dir`", "JSON.`relative/dir` reads a file by path"),
        ("select (select count(*) from text.`notes`) as n from a", "text.`notes` reads a file by path"),
        ("select * from org.apache.spark.sql.csv.`/x`", "csv.`/x` reads a file by path"),
        ("select * from delta.`s3a://bucket/t`", "delta.`s3a://bucket/t` reads a file by path"),
        ("select * from READ_FILES('/data', format => 'csv')", "READ_FILES() reads files"),
        ("select * from a join spark_catalog.default.t using (id)", "spark_catalog. names a catalog table"),
        ("table global_temp.shared", "global_temp. names a catalog table"),
    ],
)
def test_reads_the_text_shows_are_refused(query: str, refused: str) -> None:
    why = refused_sql(query)
    assert why is not None and why.startswith(refused)


@pytest.mark.parametrize(
    "query",
    [
        "select a.`weird name`, t.`id` from a join b as t using (id)",
        "select * from a where note = 'see csv.`/etc/passwd`'",
        "select `parquet`.id from a as `parquet`",
        "select * from range(10)",
        "select read_file_count from a -- read_files('/x')",
    ],
)
def test_queries_that_only_look_like_reads_pass(query: str) -> None:
    assert refused_sql(query) is None
