"""A sql stage calls Spark's built-in functions only, never reflection, however the query spells it.

Decided by the params model on the text (``dagspec validate``) and again in the job on Spark's analyzed
plan, in a classic driver and over Spark Connect: the job's check is called directly here, so it is
shown to hold where the text check is bypassed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dagspec.errors import SpecValidationError, StageFailedError
from dagspec.kinds.base import Inputs
from dagspec.kinds.plan_inputs import checked_sql
from dagspec.kinds.sql_functions import REFUSED, SPARK_FUNCTIONS, plan_call_refusal
from dagspec.kinds.transform.sql import SqlParams
from dagspec.spec.loader import load_spec
from tests.helpers import parquet_table, write_spec

REFLECT = "'java.lang.System', 'getProperty', 'user.dir'"
# the same call of System.getProperty by reflection, as a query can spell it
SPELLINGS = [
    f"select `reflect`({REFLECT}) as env from a",
    f"select ReFlEcT /* a comment */ ({REFLECT}) from a",
    f"select reflect -- a comment\n ({REFLECT}) from a",
    f"select java_method\t({REFLECT}) from a",
    f"select TRY_REFLECT({REFLECT}) from a",
    f"select system.builtin.reflect({REFLECT}) from a",
    f"select builtin.java_method({REFLECT}) from a",
    f"select `system`.`builtin`.`reflect`({REFLECT}) from a",
    f"select `System` . `Builtin` . `Java_Method` ({REFLECT}) from a",
    f"select id from a where length(concat('x', reflect({REFLECT}))) > 0",
    f"select * from a where id in (select id from b where reflect({REFLECT}) is not null)",
]
ADVICE = (
    "a sql stage calls Spark's built-in functions only, without reflection or file reads; "
    "a kind of your own runs code (docs/security.md)"
)


@pytest.mark.parametrize("query", SPELLINGS)
def test_every_spelling_of_reflection_is_refused_by_the_params_model(query: str) -> None:
    with pytest.raises(
        ValidationError, match=r"(reflect|java_method|try_reflect)\(\) calls Java methods by reflection and is refused"
    ):
        SqlParams(query=query)


@pytest.mark.parametrize(
    ("query", "why"),
    [
        (f"select identifier('reflect')({REFLECT})", r"IDENTIFIER\(...\) as a function's name is refused"),
        (f"select identifier('re' || 'flect')({REFLECT})", r"IDENTIFIER\(...\) as a function's name is refused"),
        ("select from_protobuf(id, 'M', '/etc/passwd') from a", r"from_protobuf\(\) reads a Protobuf descriptor"),
        (
            "select from_avro(b, '\"int\"', map('avroSchemaUrl', 'file:///etc/passwd')) from a",
            r"from_avro\(\) takes Avro reader options",
        ),
        ("select my_udf(id) from a", r"my_udf\(\) is not one of Spark's built-in functions"),
        ("select default.upper(id) from a", r"default\.upper\(\) is not one of Spark's built-in functions"),
    ],
)
def test_what_is_not_a_plain_built_in_function_is_refused(query: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        SqlParams(query=query)


def test_strings_and_built_in_functions_pass_the_text_check() -> None:
    for query in (
        "select 'reflect(1)' as s, upper('java_method(') as t from a",
        "select system.builtin.upper(`id`), transform(array(1), x -> x + 1), count(*) over () from a",
    ):
        assert SqlParams(query=query).query == query


def test_validate_names_the_file_line_and_field(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path,
        """
        stages:
          env: {kind: sql, params: {query: "select `system`.`builtin`.`reflect`('java.lang.System', 'getenv')"}}
        """,
    )
    with pytest.raises(SpecValidationError) as info:
        load_spec(path, "pipelines/env.yaml")
    assert [str(i) for i in info.value.issues] == [
        "pipelines/env.yaml:2:36: stages.env.params.query: reflect() calls Java methods by reflection and is "
        """refused (docs/security.md) (got "select `system`.`builtin`.`reflect`('java.lang.System', 'getenv')")"""
    ]


def test_a_plan_shortened_by_spark_is_refused_and_qualified_names_are_read_whole() -> None:
    # the job prints plans without the field limit: a shortened node can only be forged, and fails closed
    assert plan_call_refusal(["Project [a#1, b#2, ... 5 more fields]"]) == (
        "has a plan node too wide to check",
        "Project [a#1, b#2, ... 5 more fields]",
    )
    assert plan_call_refusal(["Project [upper(s#1) AS u#2, spark_catalog.default.upper(s#1) AS v#3]"]) == (
        "calls spark_catalog.default.upper(...), which is not one of Spark's built-in functions (a string or a "
        "name that reads like a call counts: the plan shows them unquoted)",
        "Project [upper(s#1) AS u#2, spark_catalog.default.upper(s#1) AS v#3]",
    )
    assert (
        plan_call_refusal(
            [
                "Window [count(1) windowspecdefinition(specifiedwindowframe(RowFrame, "
                "unboundedpreceding$(), currentrow$())) AS n#4L]"
            ]
        )
        is None
    )


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("calls")
    return {"a": str(parquet_table(spark, root, 20)), "b": str(parquet_table(spark, root, 10))}


def inputs(session: Any, tables: dict[str, str]) -> Inputs:
    return Inputs({role: session.read.parquet(path) for role, path in tables.items()})


@pytest.mark.spark
@pytest.mark.parametrize(
    "query",
    [
        *SPELLINGS,
        f"select identifier('reflect')({REFLECT}) from a",
        f"select identifier('system.builtin.' || 'java_method')({REFLECT}) from a",
        # past the 25 fields Spark shows of a node by default (spark.sql.debug.maxToStringFields)
        "select " + ", ".join(f"id + {i} as c{i}" for i in range(40)) + f", reflect({REFLECT}) as r from a",
        "select to_json(struct(" + ", ".join(f"id as c{i}" for i in range(40)) + f", reflect({REFLECT}))) from a",
    ],
)
def test_the_job_refuses_reflection_on_the_analyzed_plan(session: Any, tables: dict[str, str], query: str) -> None:
    with pytest.raises(
        StageFailedError,
        match=rf"^stage 'q': its query calls Java methods by reflection \((reflect|java_method|try_reflect)\(\.\.\.\)\), "
        rf"in the plan: .*; {re.escape(ADVICE)}$",
    ):
        checked_sql(session, query, inputs(session, tables), "q")


@pytest.mark.spark
def test_the_job_refuses_functions_that_are_not_built_in(session: Any, tables: dict[str, str]) -> None:
    # a literal that reads like a call adds a refusal: the plan's text shows strings unquoted
    with pytest.raises(
        StageFailedError,
        match=r"^stage 'q': its query calls my_udf\(\.\.\.\), which is not one of Spark's built-in functions \(a string "
        r"or a name that reads like a call counts: the plan shows them unquoted\), in the plan: Project \[my_udf\(1\) AS s#",
    ):
        checked_sql(session, "select 'my_udf(1)' as s from a", inputs(session, tables), "q")


@pytest.mark.spark
@pytest.mark.parametrize(
    "query",
    [
        "select " + ", ".join(f"id + {i} as c{i}" for i in range(40)) + " from a",
        "select to_json(struct(*)), cast(id as decimal(10, 2)), cast(id as string) from a",
        "select label, count(*) as n, sum(id) filter (where id > 2) as s from a group by label",
        "select id, row_number() over (partition by label order by id desc) as r, lag(id) over (order by id) from a",
        "select transform(array(id), x -> x + 1), aggregate(array(id), 0L, (s, x) -> s + x) from a",
        "select * from (select label, id from a) pivot (sum(id) for label in (0, 1))",
        "select from_json('{\"x\": 1}', 'x int, y array<string>, z map<string, decimal(5, 1)>') as j from a",
        "select system.builtin.upper(cast(id as string)), date_add(current_date(), 1), timestampadd(hour, 1, "
        "current_timestamp()), try_cast('1' as int), 'a' like any ('a%', 'b%') from a",
        "select * from a where exists (select 1 from b where b.id = a.id) and id in (select id from b)",
        "select /*+ BROADCAST(b), REPARTITION(2, id), REBALANCE */ a.id from a join b using (id)",
    ],
)
def test_built_in_functions_pass_the_plan_check(session: Any, tables: dict[str, str], query: str) -> None:
    assert SqlParams(query=query).query == query
    checked_sql(session, query, inputs(session, tables), "q").limit(1).collect()


@pytest.mark.spark
def test_the_allowlist_is_the_running_sparks_built_in_functions(spark: Any) -> None:
    # a newer Spark's functions are refused until reviewed and added (the reflection ones never are)
    names = {row[0] for row in spark.sql("show system functions").collect()}
    assert {name for name in names if re.fullmatch(r"[A-Za-z_][\w$]*", name)} == SPARK_FUNCTIONS
    assert set(REFUSED) <= SPARK_FUNCTIONS
