"""Kind ``check``: declarative expectations over a table, computed in one Spark aggregation.

The expectations (row count bounds; per column ``not_null``, ``min``, ``max``, ``in``,
``unique``, ``max_null_fraction``; the column types) are turned into aggregate expressions and
evaluated by a single ``agg`` over the input: one pass, only the counts and a few example values
reach the driver. The input passes through unchanged as ``data``, so stages that read the check
read data that met it. Results go to the manifest's metrics and to ``check.md`` beside the data in
the checkpoint (a file next to ``data``, not an output, so ``stage`` alone still names the table).
With ``severity: fail`` an expectation not met fails the stage with one line per violation.

Array columns (``HLF_input``) and Spark ML vectors are checked element by element for ``min``,
``max`` and ``in``. ``unique`` ignores nulls (SQL's UNIQUE); NaN counts as above any ``max``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from dagspec import storage
from dagspec.errors import StageFailedError
from dagspec.kinds.base import TABLE, Inputs, Outputs, StageContext, StageParams, kind
from dagspec.kinds.quality.quarantine import committed_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger("dagspec.stage")
REPORT = "check.md"
Bound = int | float | str
Value = int | float | str | bool
# judges an expectation from its aggregates' values and the row count: (met?, what was observed)
Judge = Callable[[list[Any], int], tuple[bool, str]]


class RowBounds(StageParams):
    """How many rows the table may have."""

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)


class ColumnRules(StageParams):
    """Expectations on one column (arrays and vectors: on every element for min, max and in)."""

    not_null: bool = False
    min: Bound | None = Field(default=None, description="no value below (numbers, or strings/dates)")
    max: Bound | None = Field(default=None, description="no value above")
    in_: list[Value] | None = Field(default=None, alias="in", min_length=1, description="the only values allowed")
    unique: bool = Field(default=False, description="no value twice (nulls ignored)")
    max_null_fraction: float | None = Field(default=None, ge=0, le=1)


class CheckParams(StageParams):
    """Expectations over a table, checked in one aggregation; the table passes through unchanged."""

    rows: RowBounds | None = None
    columns: dict[str, ColumnRules] = Field(default_factory=dict)
    schema_: dict[str, str] | None = Field(
        default=None, alias="schema", description="column -> Spark type (int, bigint, double, array<double>, ...)"
    )
    severity: Literal["fail", "warn"] = Field(default="fail", description="fail the stage, or log and go on")

    @model_validator(mode="after")
    def _something_to_check(self) -> CheckParams:
        if self.rows is None and not self.columns and not self.schema_:
            raise ValueError("nothing to check: give rows, columns or schema")
        return self


@dataclass
class Expectation:
    """One expectation: its aggregates (named ``e<i>_<k>``) and how to judge their values."""

    column: str
    rule: str
    aggregates: list[Column] = field(default_factory=list)
    judge: Judge = lambda values, rows: (True, "")


@kind("check", params=CheckParams, inputs={"data": TABLE})
def check(inputs: Inputs, params: CheckParams, ctx: StageContext) -> Outputs:
    """Expectations over a table (row count, nulls, ranges, allowed values, uniqueness, types) in one pass."""
    from pyspark.sql import functions as F

    df = inputs.table("data")
    expectations = build_expectations(df, params)
    named = [agg.alias(f"e{i}_{k}") for i, e in enumerate(expectations) for k, agg in enumerate(e.aggregates)]
    row = df.agg(F.count(F.lit(1)).alias("rows"), *named).first()
    assert row is not None
    rows = int(row["rows"])
    results = []
    for i, e in enumerate(expectations):
        passed, observed = e.judge([row[f"e{i}_{k}"] for k in range(len(e.aggregates))], rows)
        results.append({"column": e.column, "rule": e.rule, "observed": observed, "passed": passed})
    failed = [r for r in results if not r["passed"]]
    storage.write_text(f"{ctx.work_dir}/{REPORT}", report_markdown(ctx.stage_name, rows, results, params.severity))
    ctx.metrics.update(
        {
            "check_rows": rows,
            "expectations": len(results),
            "violations": len(failed),
            "severity": params.severity,
            "results": results,
            "report": committed_path(ctx, REPORT),
        }
    )
    if failed:
        lines = "\n".join(f"  {r['column']}: {r['rule']}: {r['observed']}" for r in failed)
        summary = f"{len(failed)} of {len(results)} expectations not met ({rows} rows):\n{lines}"
        if params.severity == "fail":
            raise StageFailedError(f"check failed: {summary}")
        log.warning("check %s (severity warn): %s", ctx.stage_name, summary)
    return {"data": df}


def build_expectations(df: DataFrame, params: CheckParams) -> list[Expectation]:
    """Every expectation of ``params`` over ``df``, with the aggregates it needs."""
    found: list[Expectation] = []
    if params.rows is not None:
        if params.rows.min is not None:
            found.append(Expectation("rows", f"min {params.rows.min}", judge=_row_count(params.rows.min, 1)))
        if params.rows.max is not None:
            found.append(Expectation("rows", f"max {params.rows.max}", judge=_row_count(params.rows.max, -1)))
    for name, expected in (params.schema_ or {}).items():
        found.append(_type_expectation(df, name, expected))
    for name, rules in params.columns.items():
        if name not in df.columns:
            found.append(
                Expectation(name, "exists", judge=_fixed(False, f"column missing (columns: {', '.join(df.columns)})"))
            )
            continue
        found.extend(_column_expectations(df, name, rules))
    return found


def _fixed(passed: bool, observed: str) -> Judge:
    return lambda values, rows: (passed, observed)


def _row_count(bound: int, sign: int) -> Judge:
    """At least (sign 1) or at most (sign -1) ``bound`` rows."""
    return lambda values, rows: ((rows - bound) * sign >= 0, f"{rows} rows")


def _type_expectation(df: DataFrame, name: str, expected: str) -> Expectation:
    from pyspark.sql.types import DataType

    try:
        wanted = DataType.fromDDL(expected).simpleString()
    except Exception as exc:  # classic and Connect raise unrelated classes for text that does not parse: all the spec's
        raise StageFailedError(f"check: schema.{name}: {expected!r} is not a Spark type ({exc})") from None
    have = df.schema[name].dataType.simpleString() if name in df.columns else None
    observed = f"is {have}" if have else "column missing"
    return Expectation(name, f"type {wanted}", judge=_fixed(have == wanted, observed))


@dataclass(frozen=True)
class _Column:
    """One column as the rules see it: its values (a vector as an array), elementwise when an array."""

    name: str
    col: Column
    values: Column
    is_array: bool
    numeric: bool
    text: bool

    def any_element(self, test: Callable[[Column], Column]) -> Column:
        from pyspark.sql import functions as F

        return (
            F.exists(self.values, lambda x: F.coalesce(test(x), F.lit(False))) if self.is_array else test(self.values)
        )

    def lowest(self, of: Column) -> Column:
        from pyspark.sql import functions as F

        return F.array_min(of) if self.is_array else of

    def highest(self, of: Column) -> Column:
        from pyspark.sql import functions as F

        return F.array_max(of) if self.is_array else of

    def literal(self, value: Value, rule: str) -> Column:
        from pyspark.sql import functions as F

        if self.numeric and isinstance(value, str | bool):
            raise StageFailedError(
                f"check: columns.{self.name}.{rule}: {value!r} is not a number, {self.name} is numeric"
            )
        # a string column compared with a number would be cast (and fail under ANSI): compare text
        return F.lit(str(value) if self.text else value)


def _column(df: DataFrame, name: str) -> _Column:
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, NumericType, StringType

    data_type = df.schema[name].dataType
    col = F.col(f"`{name.replace('`', '``')}`")
    element_type = data_type.elementType if isinstance(data_type, ArrayType) else data_type
    return _Column(
        name=name,
        col=col,
        values=vector_to_array(col) if isinstance(data_type, VectorUDT) else col,
        is_array=isinstance(data_type, VectorUDT | ArrayType),
        numeric=isinstance(data_type, VectorUDT) or isinstance(element_type, NumericType),
        text=isinstance(element_type, StringType),
    )


def _column_expectations(df: DataFrame, name: str, rules: ColumnRules) -> list[Expectation]:
    from pyspark.sql import functions as F

    c = _column(df, name)
    nulls = F.count_if(c.col.isNull())
    found: list[Expectation] = []
    if rules.not_null:
        found.append(Expectation(name, "not_null", [nulls], lambda v, n: (v[0] == 0, f"{v[0]} null rows")))
    if rules.max_null_fraction is not None:
        limit = rules.max_null_fraction
        found.append(
            Expectation(
                name,
                f"max_null_fraction {limit}",
                [nulls],
                lambda v, n: (v[0] <= limit * n, f"{_fmt(v[0] / n if n else 0.0)} ({v[0]} of {n} rows null)"),
            )
        )
    if rules.min is not None:
        found.append(_min_expectation(c, rules.min))
    if rules.max is not None:
        found.append(_max_expectation(c, rules.max))
    if rules.in_ is not None:
        found.append(_in_expectation(c, rules.in_))
    if rules.unique:
        found.append(
            Expectation(
                name,
                "unique",
                [F.count(c.col), F.count_distinct(c.col)],
                lambda v, n: (v[0] == v[1], f"{v[0] - v[1]} duplicate rows ({v[1]} distinct of {v[0]} non-null)"),
            )
        )
    return found


def _min_expectation(c: _Column, bound: Bound) -> Expectation:
    from pyspark.sql import functions as F

    low = c.literal(bound, "min")
    below = F.count_if(c.any_element(lambda x: x < low))
    return Expectation(
        c.name,
        f"min {bound}",
        [below, F.min(c.lowest(c.values))],
        lambda v, n: (v[0] == 0, f"min {_fmt(v[1])} ({v[0]} rows below)" if v[0] else f"min {_fmt(v[1])}"),
    )


def _max_expectation(c: _Column, bound: Bound) -> Expectation:
    from pyspark.sql import functions as F

    high = c.literal(bound, "max")
    above = F.count_if(c.any_element(lambda x: (x > high) | (F.isnan(x) if c.numeric else F.lit(False))))
    return Expectation(
        c.name,
        f"max {bound}",
        [above, F.max(c.highest(c.values))],
        lambda v, n: (v[0] == 0, f"max {_fmt(v[1])} ({v[0]} rows above)" if v[0] else f"max {_fmt(v[1])}"),
    )


def _in_expectation(c: _Column, values: list[Value]) -> Expectation:
    from pyspark.sql import functions as F

    allowed = [c.literal(x, "in") for x in values]
    outside = c.any_element(lambda x: x.isNotNull() & ~x.isin(*allowed))
    bad = F.filter(c.values, lambda x: ~x.isin(*allowed)) if c.is_array else F.when(outside, c.values)
    return Expectation(
        c.name,
        f"in {list(values)}",
        [F.count_if(outside), F.min(c.lowest(bad)), F.max(c.highest(bad))],
        lambda v, n: (v[0] == 0, f"{v[0]} rows outside (e.g. {_examples(v[1], v[2])})" if v[0] else "none outside"),
    )


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _examples(low: Any, high: Any) -> str:
    return ", ".join(dict.fromkeys(_fmt(v) for v in (low, high) if v is not None))


def report_markdown(stage: str, rows: int, results: list[dict[str, Any]], severity: str) -> str:
    """``check.md``: one line per expectation."""
    failed = sum(not r["passed"] for r in results)
    verdict = "passed" if not failed else ("failed" if severity == "fail" else "warnings")
    lines = [
        f"# check {stage}: {verdict}",
        "",
        f"{rows} rows, {len(results)} expectations, {failed} not met (severity: {severity}).",
        "",
        "| column | rule | observed | result |",
        "|---|---|---|---|",
    ]
    mark = "FAIL" if severity == "fail" else "warn"
    lines += [
        f"| {_cell(r['column'])} | {_cell(r['rule'])} | {_cell(r['observed'])} | {'ok' if r['passed'] else mark} |"
        for r in results
    ]
    return "\n".join(lines) + "\n"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
