"""The Criteo column names and their DDL; a spec can ask for the schema by name (``schema: criteo``)."""

from __future__ import annotations

CRITEO_INTEGER_COLUMNS = [f"I{i}" for i in range(1, 14)]
CRITEO_CATEGORICAL_COLUMNS = [f"C{i}" for i in range(1, 27)]
CRITEO_COLUMNS = ["label", *CRITEO_INTEGER_COLUMNS, *CRITEO_CATEGORICAL_COLUMNS]


def criteo_ddl() -> str:
    """label int, I1..I13 long, C1..C26 string."""
    fields = (
        ["label INT"]
        + [f"{c} BIGINT" for c in CRITEO_INTEGER_COLUMNS]
        + [f"{c} STRING" for c in CRITEO_CATEGORICAL_COLUMNS]
    )
    return ", ".join(fields)


def named_schema(name: str) -> str | None:
    """The DDL for a named schema, or None when ``name`` is not one (then it is DDL itself)."""
    return {"criteo": criteo_ddl}.get(name, lambda: None)()
