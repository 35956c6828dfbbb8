"""A written table's rows and schema from its Parquet footers, without a Spark job.

Spark writes its own schema into every Parquet file's footer (key
``org.apache.spark.sql.parquet.row.metadata``) and each row group's row count is in the footer too,
so the manifest's ``rows`` and ``schema`` of an output just written need not read it back through
Spark (a schema job and a two-stage count per output: 3 of a small stage's 10-16 jobs). Only for
what the footers can answer exactly: a local folder of at most ``MAX_FILES`` Parquet files directly
in it (partition folders would add columns no footer holds), each with Spark's schema, all the
same; anything else (remote storage, no file, another writer, a type the client cannot name)
returns None and the caller asks Spark.

The other way round, ``write_empty`` writes a table of no rows as Spark would (a quarantine of
nothing), without a Spark job.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from dagspec import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
MAX_FILES = 256  # each footer is a small read from the client; past this, one Spark job is cheaper


def count_rows(spark: SparkSession, path: str) -> int:
    """Rows of the Parquet folder ``path``: from its footers, else counted by Spark."""
    footed = rows_and_schema(path)
    return footed[0] if footed is not None else spark.read.parquet(path).count()


def describe(spark: SparkSession, path: str) -> tuple[int, str]:
    """(rows, schema) of the Parquet folder ``path``: from its footers, else read back through Spark."""
    footed = rows_and_schema(path)
    if footed is None:
        written = spark.read.parquet(path)
        footed = written.count(), written.schema.simpleString()
    return footed


def rows_and_schema(path: str) -> tuple[int, str] | None:
    """(rows, Spark's ``simpleString`` of the schema) of the Parquet folder ``path``, or None."""
    if not storage.is_local(path):
        return None
    folder = storage.local_path(path).rstrip("/")
    files = [storage.local_path(f.path) for f in storage.list_files(path)]
    if not files or len(files) > MAX_FILES:
        return None
    if not all(f.endswith(".parquet") and os.path.dirname(f) == folder for f in files):
        return None
    try:
        import pyarrow.parquet as pq
        from pyspark.sql.types import StructType

        rows = 0
        schemas = set()
        for name in files:
            footer = pq.read_metadata(name)
            rows += footer.num_rows
            schemas.add((footer.metadata or {}).get(SPARK_SCHEMA_KEY))
        if len(schemas) != 1 or None in schemas:
            return None
        (schema_json,) = schemas
        assert schema_json is not None
        return rows, StructType.fromJson(json.loads(schema_json)).simpleString()
    except Exception:  # an unreadable footer or an unknown type: Spark answers instead
        return None


def write_empty(path: str, schema: StructType) -> bool:
    """Write the Parquet folder ``path`` holding no rows of ``schema`` as Spark writes one (one file
    with Spark's schema in its footer, and ``_SUCCESS``); False (nothing written) where it cannot:
    remote storage, or a type without an Arrow twin."""
    if not storage.is_local(path):
        return False
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow = to_arrow_schema(schema).with_metadata({SPARK_SCHEMA_KEY: schema.json().encode()})
    except Exception:  # a type Arrow cannot hold: Spark writes it
        return False
    folder = storage.local_path(path)
    os.makedirs(folder)  # fails if it exists, as Spark's mode "error" does
    pq.write_table(pa.Table.from_batches([], schema=arrow), os.path.join(folder, "part-00000-empty.snappy.parquet"))
    open(os.path.join(folder, "_SUCCESS"), "w").close()
    return True
