"""Kind ``sql``: a Spark SQL query over the stage's inputs, each a temporary view named by its role."""

from __future__ import annotations

from pydantic import Field

from dagspec.kinds.base import Inputs, Outputs, StageContext, StageParams, kind


class SqlParams(StageParams):
    """A Spark SQL query; each input is a temporary view named by its role."""

    query: str = Field(min_length=1)


@kind("sql", params=SqlParams, any_inputs=True)
def sql(inputs: Inputs, params: SqlParams, ctx: StageContext) -> Outputs:
    """Run a Spark SQL query over the inputs (views named by their roles)."""
    for role, df in inputs.items():
        assert not isinstance(df, str)
        df.createOrReplaceTempView(role)
    return {"data": ctx.spark.sql(params.query)}
