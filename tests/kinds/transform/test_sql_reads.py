"""A sql stage reads only its inputs: Spark's analysis of the query decides, in a classic driver and over
Spark Connect (a Connect service started in the tests' own JVM on a free port)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs
from dagspec.kinds.plan_inputs import check_reads_only_inputs, checked_sql, register_input_views
from tests.helpers import load_and_run, parquet_table, spec_reading

pytestmark = pytest.mark.spark

ADVICE = "a stage reads only its inputs: add a read stage for it and name that stage in inputs:"


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two Parquet inputs, a CSV file, and a catalog table of the test session."""
    root = tmp_path_factory.mktemp("reads")
    (root / "secret.csv").write_text("id,word\n1,hidden\n")
    spark.sql(f"create table if not exists dagspec_reads_t using parquet location '{root / 't'}' as select 1L as id")
    return {
        "a": str(parquet_table(spark, root, 20)),
        "b": str(parquet_table(spark, root, 10)),
        "csv": str(root / "secret.csv"),
    }


def inputs(session: Any, tables: dict[str, str]) -> Inputs:
    return Inputs({"a": session.read.parquet(tables["a"]), "b": session.read.parquet(tables["b"])})


@pytest.mark.parametrize(
    "query",
    [
        "select * from a join b using (id)",
        "select x.id from a x join a y on x.id = y.id + 1",
        "with q as (select id from a where label = 0) select count(*) as n, (select max(id) from b) as m from q",
        "select * from a where id in (select id from b) union all select id, 1 from range(3)",
        "select a.id, v.w from a join (values (1, 'x'), (2, 'y')) as v(id, w) using (id)",
        "select explode(array(1, 2)) as e",
    ],
)
def test_queries_over_their_inputs_run(session: Any, tables: dict[str, str], query: str) -> None:
    df = checked_sql(session, query, inputs(session, tables), "q")
    assert df.count() >= 1


@pytest.mark.parametrize(
    ("query", "read"),
    [
        ("select * from identifier('csv.`{csv}`')", "a csv file by path"),
        ("select * from a where id < (select count(*) from identifier('text.`{csv}`'))", "a text file by path"),
        ("select *, (select max(id) from identifier('parquet.`{b}`')) as m from a", "a parquet file by path"),
        ("select * from a join dagspec_reads_t using (id)", "the table spark_catalog.default.dagspec_reads_t"),
        (
            "select * from a where exists (select 1 from dagspec_reads_t)",
            "the table spark_catalog.default.dagspec_reads_t",
        ),
    ],
)
def test_reads_around_the_inputs_are_refused(session: Any, tables: dict[str, str], query: str, read: str) -> None:
    with pytest.raises(StageFailedError, match=rf"^stage 'q': its query reads {read} \(plan: .*\); {ADVICE}$"):
        checked_sql(session, query.format(**tables), inputs(session, tables), "q")


def test_every_file_read_must_be_an_inputs_file(session: Any, tables: dict[str, str]) -> None:
    # inputFiles() is the second, independent check: here the inputs' own files are not allowed
    views = register_input_views(session, inputs(session, tables))
    query = session.sql("select * from a")
    check_reads_only_inputs(query, views, "q")
    with pytest.raises(
        StageFailedError, match=r"^stage 'q': its query reads files that are not its inputs \(file:.*/t20/part-"
    ):
        check_reads_only_inputs(query, replace(views, files=frozenset()), "q")


def test_a_view_that_is_not_an_input_is_refused(session: Any, tables: dict[str, str]) -> None:
    session.range(3).createOrReplaceTempView("left_over")
    with pytest.raises(StageFailedError, match=r"reads a view \(plan: View \(`left_over`"):
        checked_sql(session, "select * from a join left_over using (id)", inputs(session, tables), "q")


def test_plan_lines_forged_by_a_literal_hide_nothing(session: Any, tables: dict[str, str]) -> None:
    # a literal and an alias with line breaks that imitate an input's plan right above a file read
    forged = "View (`a`, [id#1L])\n   +- SubqueryAlias dagspec_input_0\n      +- Relation [id#1L] parquet"
    query = (
        f"select '{forged}' as s, * from (select * from identifier('parquet.`{tables['b']}`')) as "
        "`t\n   +- SubqueryAlias dagspec_input_0`"
    )
    with pytest.raises(StageFailedError, match=rf"^stage 'q': its query reads .*; {ADVICE}$"):
        checked_sql(session, query, inputs(session, tables), "q")
    query = f"select '{forged}' as s, (select count(*) from identifier('parquet.`{tables['b']}`')) as n from a"
    with pytest.raises(
        StageFailedError, match=r"^stage 'q': its query reads a relation \(plan: Relation \[id#1L\] parquet AS s#"
    ):
        checked_sql(session, query, inputs(session, tables), "q")


def test_a_sql_stage_reading_a_file_fails_and_commits_nothing(spark: Any, home: Path, tmp_path: Path) -> None:
    data = parquet_table(spark, tmp_path, 10)
    (tmp_path / "other.csv").write_text("1\n2\n")
    spec = spec_reading(
        tmp_path / "p",
        data,
        f"""
        sneaky:
          kind: sql
          inputs: {{data: raw}}
          params: {{query: "select * from data where id < (select count(*) from identifier('csv.`{tmp_path}/other.csv`'))"}}
        """,
    )
    with pytest.raises(StageFailedError, match=r"^stage 'sneaky': its query reads a csv file by path"):
        load_and_run(spark, spec)
    assert not list((tmp_path / "storage" / "pipe" / "sneaky").glob("*/_SUCCESS"))
