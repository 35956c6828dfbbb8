"""Kind ``sql``: a Spark SQL query over the stage's inputs, each a temporary view named by its role.

A query, not a command: the params model refuses statements other than a query (``ADD JAR``,
``CREATE FUNCTION ... USING JAR``, ``SET``, ``EXECUTE IMMEDIATE``, ...), writes hidden after a
``WITH`` or a Hive-style ``FROM`` (``INSERT INTO``/``OVERWRITE``, ``MERGE INTO``), script transforms
(``SELECT TRANSFORM(...) USING 'command'``, and Hive's ``MAP``/``REDUCE ... USING``, which run a
shell command on every executor) and calls of what is not a Spark built-in function, or is one that
runs code or reads files: ``reflect``, ``java_method``, ``try_reflect`` however spelt (backticked,
``system.builtin.reflect``, any case, a comment before the ``(``, ``IDENTIFIER('reflect')(...)``;
the lists are in ``dagspec.kinds.sql_functions``). Pydantic runs the check wherever the params are
validated: when the spec loads (a literal query) and in the job after rendering (a templated one).
In the job, Spark's analyzed plan decides again (``dagspec.kinds.plan_inputs``). See
docs/security.md.

A query must parse: ``dagspec validate`` parses it as Spark SQL with sqlglot (no JVM), so a typo
is a ``file:line:col`` error of the spec, not a failure at run time (``syntax_error``). A templated
query is parsed once rendered (with the params' defaults at validate time). sqlglot is the more
lenient parser of the two: what it accepts and Spark refuses still fails at run time, with Spark's
error first.

A query reads only its inputs. The params model refuses what it can see in the text (a file read
by path, ``csv.`/data/x.csv```; a file-reading table function, ``read_files(...)``; a table
qualified by ``spark_catalog`` or ``global_temp``), and the job decides from Spark's own analysis
of the query (``dagspec.kinds.plan_inputs``), which also sees ``IDENTIFIER('...')``, catalog
tables and views, and reads inside subqueries.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind, suggest
from dagspec.kinds.plan_inputs import ADVICE, checked_sql
from dagspec.kinds.sql_functions import text_call_refusal

QUERY_STARTS = ("select", "with", "from", "values", "table")
_SCRIPT = re.compile(r"\busing\s*r?''", re.IGNORECASE)
# the same, looked for in the raw text too: a lexer confused by an odd literal must not hide it
_SCRIPT_RAW = re.compile(r"\b(transform|map|reduce)\b[\s\S]*\busing\s+r?['\"]", re.IGNORECASE)
# a write hidden after WITH or a Hive-style FROM (``FROM t INSERT OVERWRITE DIRECTORY '/x' ...``)
_WRITE = re.compile(r"\b(insert\s+(into|overwrite)|merge\s+into)\b", re.IGNORECASE)
# Spark's data sources, as in ``csv.`/path``` (run SQL on files directly)
FILE_FORMATS = frozenset(
    [
        "csv",
        "json",
        "parquet",
        "orc",
        "text",
        "binaryfile",
        "avro",
        "xml",
        "delta",
        "iceberg",
        "hudi",
        "jdbc",
        "libsvm",
        "image",
    ]
)
_BY_PATH = re.compile(r"([A-Za-z_]\w*)\s*\.\s*(`(?:[^`]|``)*`)")
_FILE_FUNCTIONS = re.compile(
    r"\b(read_files|cloud_files|read_kafka|read_kinesis|read_pubsub|read_pulsar|read_statestore)\s*\(", re.IGNORECASE
)
_CATALOG = re.compile(r"\b(spark_catalog|global_temp)\s*\.", re.IGNORECASE)


def skeleton(query: str, names: bool = False) -> str:
    """The query with comments blanked and string literals emptied (``''``), identifiers in backticks
    as ``x`` (kept as written with ``names``)."""
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if query.startswith("--", i):
            end = query.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif query.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if query.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif query.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c in "'\"":
            raw = bool(out) and out[-1] in "rR" and (len(out) < 2 or not (out[-2].isalnum() or out[-2] == "_"))
            i += 1
            while i < n and query[i] != c:
                i += 2 if query[i] == "\\" and not raw else 1
            i += 1
            out.append("''")
        elif c == "`":
            end = query.find("`", i + 1)
            while end >= 0 and query.startswith("``", end):
                end = query.find("`", end + 2)
            start, i = i, n if end < 0 else end + 1
            out.append(query[start:i] if names else "x")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def refused_sql(query: str) -> str | None:
    """Why ``query`` may not run as a ``sql`` stage, or None."""
    text = skeleton(query)
    first = re.match(r"[\s(]*([A-Za-z_]+)", text)
    word = first.group(1).lower() if first else ""
    if word not in QUERY_STARTS:
        return f"a sql stage runs one query (starting with {', '.join(w.upper() for w in QUERY_STARTS)})" + (
            f"; this one starts with {word.upper()}" if word else ""
        )
    if re.search(r";\s*\S", text):
        return "a sql stage runs one query: remove the ';' and what follows"
    if _SCRIPT.search(text) or _SCRIPT_RAW.search(query):
        return (
            "script transforms (TRANSFORM/MAP/REDUCE ... USING '<command>') run a shell command on every executor "
            "and are refused; use Spark SQL functions, or a kind of your own (docs/security.md)"
        )
    write = _WRITE.search(text)
    if write:
        return (
            f"a sql stage returns a table and writes nothing: {' '.join(write.group(1).upper().split())} is "
            "refused (the stage's output is its query's result; export writes files)"
        )
    with_names = skeleton(query, names=True)
    templated = "{{" in query or "{%" in query
    called = text_call_refusal(with_names, None if templated else _parsed(query, "spark")[0])
    return refused_read(text, with_names) or called


def syntax_error(query: str) -> str | None:
    """sqlglot's message and position when ``query`` does not parse as Spark SQL, else None.

    A query still holding a template (not rendered yet) is left to the check after rendering.
    Where sqlglot is stricter than Spark, the query passes: Spark's variant paths (``v:a.b``) are
    read with sqlglot's Databricks dialect, and a keyword where Spark takes a name (a column
    ``values``, an alias ``where``) is tried again in backticks.
    """
    if "{{" in query or "{%" in query:
        return None
    error = _parse_error(query, "spark")
    if error is None or _parse_error(query, "databricks") is None:
        return None
    retried, again = query, error
    for _ in range(8):  # one keyword per try, a few at most
        quoted = _keyword_quoted(retried, again)
        if quoted is None:
            break
        retry_error = _parse_error(quoted, "spark")
        if retry_error is None:
            return None
        retried, again = quoted, retry_error
    from sqlglot.errors import ParseError

    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        near = f" at {first['highlight']!r}" if first.get("highlight") else ""
        return (
            f"does not parse as Spark SQL: {first['description']}{near} "
            f"(line {first['line']}, col {first['col']} of the query)"
        )
    return f"does not parse as Spark SQL: {error}"  # an unclosed string, quoted name or comment


def _parse_error(query: str, dialect: str) -> Exception | None:
    return _parsed(query, dialect)[1]


@functools.lru_cache(maxsize=256)
def _parsed(query: str, dialect: str) -> tuple[Any, Exception | None]:
    """sqlglot's tree of ``query`` (read-only: it is shared), or the error it stopped at."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        return sqlglot.parse_one(query, read=dialect), None
    except (ParseError, TokenError) as exc:
        return None, exc


def _keyword_quoted(query: str, error: Exception) -> str | None:
    """``query`` with the keyword where ``error`` stopped (or just before) in backticks, else None."""
    from sqlglot.dialects.spark import Spark
    from sqlglot.errors import ParseError

    if not isinstance(error, ParseError) or not error.errors:
        return None
    first = error.errors[0]
    highlight = str(first.get("highlight") or "")
    lines = query.split("\n")
    # sqlglot's col is where the highlighted token ends (1-based)
    end = sum(len(line) + 1 for line in lines[: int(first["line"]) - 1]) + int(first["col"])
    if end - len(highlight) < 0 or query[end - len(highlight) : end] != highlight:
        return None
    before = re.search(r"([A-Za-z_]\w*)\s*$", query[: end - len(highlight)])
    spots = [(end - len(highlight), highlight)] + ([(before.start(1), before.group(1))] if before else [])
    for start, word in spots:
        if re.fullmatch(r"[A-Za-z_]\w*", word) and word.upper() in Spark.Tokenizer.KEYWORDS:
            return f"{query[:start]}`{word}`{query[start + len(word) :]}"
    return None


def refused_read(text: str, with_names: str) -> str | None:
    """Why a query (its skeleton, and the same with names kept) reads something besides its inputs."""
    for found in _BY_PATH.finditer(with_names):
        source, name = found.group(1), found.group(2)
        if source.lower() in FILE_FORMATS or "/" in name:
            return f"{source}.{name} reads a file by path; {ADVICE}"
    function = _FILE_FUNCTIONS.search(text)
    if function:
        return f"{function.group(1)}() reads files; {ADVICE}"
    catalog = _CATALOG.search(text)
    if catalog:
        return f"{catalog.group(1)}. names a catalog table; {ADVICE}"
    return None


class SqlParams(StageParams):
    """A Spark SQL query; each input is a temporary view named by its role."""

    query: str = Field(min_length=1)

    @field_validator("query")
    @classmethod
    def _a_query_only(cls, query: str) -> str:
        why = refused_sql(query) or syntax_error(query)
        if why is not None:
            raise ValueError(why)
        return query


def unknown_views(params: SqlParams, roles: Sequence[str]) -> list[tuple[str, str]]:
    """The query's first table name that is none of the stage's inputs (views named by their roles).

    Names are compared as Spark compares them (case-insensitively); a CTE's name is the query's own.
    A query sqlglot cannot parse is left to the syntax check and the job.
    """
    from sqlglot import exp

    tree, error = _parsed(params.query, "spark")
    if error is not None:
        return []
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    known = {role.lower() for role in roles} | ctes
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function (range(10), explode(...)): no read of a table
        name = ".".join(part.name for part in table.parts)
        if name.lower() not in known:
            inputs = ", ".join(roles) or "none"
            return [
                (
                    "query",
                    f"reads {name!r}, which is none of the stage's inputs ({inputs}){suggest(name, roles)}; "
                    "each input is a view named by its role under inputs:",
                )
            ]
    return []


@kind("sql", params=SqlParams, any_inputs=True, check_inputs=unknown_views)
def sql(inputs: Inputs, params: SqlParams, ctx: StageContext) -> Outputs:
    """Run a Spark SQL query over the inputs (views named by their roles)."""
    return {"data": checked_sql(ctx.spark, params.query, inputs, ctx.stage_name)}
