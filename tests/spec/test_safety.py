"""The trust boundary in the spec: no shell from sql, no code-loading Spark conf, no templated conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagspec.errors import SpecValidationError, StageConfigError
from dagspec.kinds.transform.sql import refused_sql
from dagspec.plan.resolve import default_context, resolve_pipeline
from dagspec.spec.loader import load_spec
from dagspec.spec.safety import ALLOWED_CONF_ENV, refusal
from tests.helpers import write_spec

TRANSFORM = "script transforms (TRANSFORM/MAP/REDUCE ... USING '<command>') run a shell command on every executor and are refused; use Spark SQL functions, or a kind of your own (docs/security.md)"


def issues(tmp_path: Path, text: str) -> list[str]:
    path = write_spec(tmp_path, text, "unsafe.yaml")
    with pytest.raises(SpecValidationError) as info:
        load_spec(path, "pipelines/unsafe.yaml")
    return [str(i) for i in info.value.issues]


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


def test_process_starting_conf_keys_and_templated_values_are_refused(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        """
        spark:
          conf:
            spark.pyspark.python: /bin/sh
            spark.driver.extraJavaOptions: "-XX:OnOutOfMemoryError=curl evil"
            spark.sql.shuffle.partitions: 8
        stages:
          q:
            kind: sql
            params: {query: select 1}
            spark:
              conf: {spark.executorEnv.LD_PRELOAD: /tmp/x.so, spark.app.note: "{{ conn.x.password }}"}
        """,
    )
    assert found == [
        "pipelines/unsafe.yaml:3:5: spark.conf: 'spark.pyspark.python' is refused: it starts this program; an "
        "administrator can allow it with DAGSPEC_ALLOWED_CONF (docs/security.md); 'spark.driver.extraJavaOptions' "
        "is refused: it injects JVM options (-javaagent, -XX:OnOutOfMemoryError=<command>, ...); an administrator "
        "can allow it with DAGSPEC_ALLOWED_CONF (docs/security.md)",
        "pipelines/unsafe.yaml:11:13: stages.q.spark.conf: 'spark.executorEnv.LD_PRELOAD' is refused: it sets "
        "environment variables of Spark's processes (PYSPARK_PYTHON, LD_PRELOAD, ...); an administrator can allow "
        "it with DAGSPEC_ALLOWED_CONF (docs/security.md); 'spark.app.note': conf values are not templates "
        "('{{ conn.x.password }}'); nothing renders them, and a secret belongs in an Airflow connection "
        "(docs/security.md)",
    ]


def test_an_administrator_allows_keys_outside_the_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = """
        spark: {conf: {spark.jars.packages: "io.delta:delta-spark_2.13:4.0.0", spark.sql.extensions: x.Y}}
        stages: {q: {kind: sql, params: {query: select 1}}}
        """
    assert len(issues(tmp_path, text)) == 1
    monkeypatch.setenv(ALLOWED_CONF_ENV, "spark.jars.packages, spark.sql.extensions")
    spec = load_spec(write_spec(tmp_path, text, "allowed.yaml"))
    assert spec.spark.conf["spark.sql.extensions"] == "x.Y"


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        ("spark.pyspark.driver.python", True),
        ("spark.executor.extraClassPath", True),
        ("spark.yarn.am.extraJavaOptions", True),
        ("spark.jars", True),
        ("spark.submit.pyFiles", True),
        ("spark.kubernetes.executor.podTemplateFile", True),
        ("spark.executor.resource.gpu.discoveryScript", True),
        ("spark.master", True),
        ("spark.sql.shuffle.partitions", False),
        ("spark.executor.memoryOverhead", False),
        ("spark.serializer", False),
    ],
)
def test_refused_keys(key: str, refused: bool) -> None:
    assert (refusal(key) is not None) == refused


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
