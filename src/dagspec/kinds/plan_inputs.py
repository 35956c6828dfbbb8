"""A stage that runs user SQL reads only its inputs and calls only allowed functions: decided from Spark's
own analysis of the query.

A file or table read inside a query (``csv.`/etc/passwd```, ``IDENTIFIER('json.`/x`')``, a catalog
table, a scalar subquery over any of them) is in no stage's cache key: rewrite it and the stage
stays ``done``. So the query's DataFrame is checked before it is returned, by two independent
means that work over Spark Connect as in a classic driver:

- ``DataFrame.inputFiles()``: every file the result reads must be a file of one of the inputs;
- the analyzed plan (``explain``'s text over Connect, the tree string in a classic driver): every
  leaf must be an input's Parquet scan, or a relation that reads nothing (``VALUES``,
  ``range(...)``, ``SELECT 1``, a ``WITH`` name); a catalog table, a file read by path, a view
  that is not an input or a relation of an unknown kind anywhere in the plan (subqueries
  included) is refused.

Plan text holds the query's own strings and names, so it could be forged with line breaks. The
input views are therefore registered over ``df.alias(<random name>)``: an input's ``Relation``
line is accepted only right below that alias, whose name no query can know in advance, and every
other rule refuses what it sees wherever it sees it (a forged line can add a refusal, never hide a
real relation).

The same analyzed plan decides which functions the query calls (``dagspec.kinds.sql_functions``):
Spark's built-in functions only, without reflection (``reflect``, ``java_method``, ``try_reflect``,
however the query spells them) or file reads. The plan is printed without Spark's limit on the
fields shown per node (``spark.sql.debug.maxToStringFields``), which would hide the 26th column of
a ``SELECT``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagspec.errors import StageFailedError
from dagspec.kinds.base import Inputs, is_connect
from dagspec.kinds.sql_functions import ADVICE as CALLS_ADVICE
from dagspec.kinds.sql_functions import plan_call_refusal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# leaves that read no data, or data written in the query itself (so in the cache key)
READS_NOTHING = frozenset({"LocalRelation", "OneRowRelation", "Range", "CTERelationRef"})
# operators that are not leaves but whose names look like relations
NOT_RELATIONS = frozenset({"CTERelationDef", "Relation", "View"}) | READS_NOTHING
_RELATION_LIKE = re.compile(r"Relation|Scan|RDD|Table|Stream|Source|Catalog", re.IGNORECASE)
_LINE = re.compile(r"^((?:[ :]  )*)(?:[+:]- )?(.*)$")
_OPERATOR = re.compile(r"'?([A-Za-z_][A-Za-z0-9_]*)")
_INPUT_RELATION = re.compile(r"Relation \[.*\] parquet")
_ANALYZED = "\n== Analyzed Logical Plan ==\n"
_OPTIMIZED = "\n== Optimized Logical Plan ==\n"
ADVICE = "a stage reads only its inputs: add a read stage for it and name that stage in inputs:"
_MAX_FIELDS = "spark.sql.debug.maxToStringFields"
_ALL_FIELDS = 2**31 - 1


@dataclass(frozen=True)
class InputViews:
    """The stage's inputs, registered as temporary views, and what the check needs to know of them."""

    roles: tuple[str, ...]
    alias: str  # the random alias every input view's plan sits under
    files: frozenset[str]  # every file of every input (``inputFiles()``)


def register_input_views(spark: SparkSession, inputs: Inputs) -> InputViews:
    """Each table input as a temporary view named by its role, over a randomly named alias."""
    alias = f"dagspec_input_{secrets.token_hex(8)}"
    files: set[str] = set()
    for role, df in inputs.tables().items():
        df.alias(alias).createOrReplaceTempView(role)
        files.update(df.inputFiles())
    return InputViews(tuple(inputs), alias, frozenset(files))


def check_reads_only_inputs(
    df: DataFrame, views: InputViews, stage: str, what: str = "query", plan: list[str] | None = None
) -> None:
    """Raise StageFailedError when ``df`` (its analyzed ``plan``) reads a file or relation that is not one of ``views``."""
    refused = plan_refusal(analyzed_plan(df) if plan is None else plan, views)
    if refused is not None:
        read, node = refused
        raise StageFailedError(f"stage {stage!r}: its {what} reads {read} (plan: {node[:200]}); {ADVICE}")
    outside = sorted(set(df.inputFiles()) - views.files)
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise StageFailedError(f"stage {stage!r}: its {what} reads files that are not its inputs ({shown}); {ADVICE}")


def check_calls(df: DataFrame, stage: str, what: str = "query", plan: list[str] | None = None) -> None:
    """Raise StageFailedError when ``df`` (its analyzed ``plan``) calls a function a sql stage may not call."""
    refused = plan_call_refusal(analyzed_plan(df) if plan is None else plan)
    if refused is not None:
        cause, node = refused
        raise StageFailedError(f"stage {stage!r}: its {what} {cause}, in the plan: {node[:200]}; {CALLS_ADVICE}")


def analyzed_plan(df: DataFrame) -> list[str]:
    """The lines of ``df``'s analyzed logical plan, every field of every node and expression shown (a
    Connect client asks the server for explain's text)."""
    conf = df.sparkSession.conf
    before = conf.get(_MAX_FIELDS, None)
    conf.set(_MAX_FIELDS, str(_ALL_FIELDS))  # expressions read it from the session's conf
    try:
        if not is_connect(df.sparkSession):
            plan = df._jdf.queryExecution().analyzed()
            # treeString(verbose, addSuffix, maxFields, ...): Spark's defaults but for maxFields
            defaults = [getattr(plan, f"treeString$default${i}")() for i in (2, 4, 5)]
            return str(plan.treeString(True, defaults[0], _ALL_FIELDS, *defaults[1:])).splitlines()
        text = str(df._explain_string(extended=True))  # type: ignore[operator]
    finally:
        if before is None:
            conf.unset(_MAX_FIELDS)
        else:
            conf.set(_MAX_FIELDS, before)
    start, end = text.find(_ANALYZED), text.rfind(_OPTIMIZED)
    if start < 0 or end < start:
        raise StageFailedError(f"the query's analyzed plan could not be read from Spark's explain output: {text[:200]}")
    # the section opens with the output schema on one line (checked_sql refuses names with line breaks)
    return text[start + len(_ANALYZED) : end].splitlines()[1:]


def plan_refusal(lines: list[str], views: InputViews) -> tuple[str, str] | None:
    """What in the analyzed plan ``lines`` is not an input and its plan node, or None."""
    if lines and re.search(r"\.\.\. \d+ more characters$", lines[-1]):
        return "a plan too long to check (spark.sql.maxPlanStringLength)", lines[-1]
    nodes = [_node(line) for line in lines]
    inputs = {f"View (`{role.replace('`', '``')}`, " for role in views.roles}
    for i, (depth, text) in enumerate(nodes):
        found = _OPERATOR.match(text)
        operator = found.group(1) if found else ""
        leaf = i + 1 == len(nodes) or nodes[i + 1][0] <= depth
        if operator == "Relation":
            below_alias = i > 0 and nodes[i - 1][1] == f"SubqueryAlias {views.alias}"
            if not (below_alias and _INPUT_RELATION.fullmatch(text)):
                return _describe(text), text
        elif operator == "View":
            if not any(text.startswith(prefix) for prefix in inputs):
                return "a view", text
        elif (_RELATION_LIKE.search(operator) and operator not in NOT_RELATIONS) or (
            leaf and operator not in READS_NOTHING
        ):
            return f"a relation Spark calls {operator or '?'}", text
    return None


def _node(line: str) -> tuple[int, str]:
    """(depth, node text) of one line of a plan's tree string."""
    found = _LINE.match(line)
    assert found is not None  # the pattern matches any line
    prefix, text = found.group(1), found.group(2)
    return len(prefix) // 3 + (1 if line[len(prefix) : len(prefix) + 3] in ("+- ", ":- ") else 0), text


def _describe(text: str) -> str:
    """``Relation [..] csv`` -> 'a csv file by path'; ``Relation db.t[..] parquet`` -> 'the table db.t'."""
    table = re.match(r"Relation ([^\[\s]+)\[", text)
    if table:
        return f"the table {table.group(1)}"
    found = re.search(r"\] (\w+)$", text)
    return f"a {found.group(1)} file by path" if found else "a relation"


def refuse_line_breaks_in_names(df: DataFrame, stage: str) -> None:
    """Column names with a line break would shift the plan's lines: refuse them (cause first)."""
    names: list[str] = []
    _collect_names(df.schema, names)
    odd = [n for n in names if "\n" in n or "\r" in n]
    if odd:
        raise StageFailedError(
            f"stage {stage!r}: column names with line breaks are refused ({odd[0]!r}): rename them (AS `name`)"
        )


def _collect_names(data_type: object, names: list[str]) -> None:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        for f in data_type.fields:
            names.append(f.name)
            _collect_names(f.dataType, names)
    elif isinstance(data_type, ArrayType):
        _collect_names(data_type.elementType, names)
    elif isinstance(data_type, MapType):
        _collect_names(data_type.keyType, names)
        _collect_names(data_type.valueType, names)


def checked_sql(spark: SparkSession, query: str, inputs: Inputs, stage: str) -> DataFrame:
    """``spark.sql(query)`` over the inputs as views, refused when it reads anything else or calls a
    function that is not allowed."""
    views = register_input_views(spark, inputs)
    df = spark.sql(query)
    refuse_line_breaks_in_names(df, stage)
    plan = analyzed_plan(df)
    check_calls(df, stage, plan=plan)
    check_reads_only_inputs(df, views, stage, plan=plan)
    return df
