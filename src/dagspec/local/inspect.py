"""``dagspec head`` and ``describe``: look inside a committed checkpoint with pyarrow (no Spark, no JVM).

``head`` reads only the first row groups it needs; ``describe`` reads the manifest and the Parquet
footers (row counts, column types, null counts from the footer statistics), never the data.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagspec import checkpoint, storage
from dagspec.errors import DagspecError
from dagspec.kinds.base import IOType
from dagspec.local.project import absolute_root, load, parse_overrides
from dagspec.plan.reasons import stage_status
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.storage import project_home

CELL_WIDTH = 24


@dataclass(frozen=True)
class Target:
    """The folder ``head``/``describe`` look at: a table or files output, or an export's published folder."""

    stage: ResolvedStage
    label: str  # stage.output, or stage (export)
    path: str
    table: bool
    manifest: dict[str, Any]


def find_target(args: argparse.Namespace) -> Target:
    """The committed output ``args.target`` (``STAGE[.output]``) names at the given params."""
    home = project_home()
    spec = load(Path(args.spec), home)
    overrides = parse_overrides(args.param, spec)
    plan = resolve_pipeline(spec, default_context(spec, overrides), storage_root=absolute_root(args.storage_root))
    name, _, output = args.target.partition(".")
    if name not in plan:
        raise DagspecError(f"{spec.source}: no stage {name!r} (stages: {', '.join(plan)})")
    stage = plan[name]
    manifest = None if stage.pending else stage.checkpoint.manifest()
    if manifest is None or not stage.checkpoint.state(stage.outputs).done:
        reasons = "; ".join(stage_status(stage).reasons) or "no checkpoint"
        raise DagspecError(f"stage {name} is not committed at these params (missing: {reasons}); run the spec first")
    if not stage.outputs:
        published = stage.publish_path
        if output or published is None:
            raise DagspecError(f"stage {name} ({stage.kind}) has no outputs")
        if checkpoint.published_fingerprint(published) != stage.fingerprint:
            raise DagspecError(f"export {published} holds another run's data: {'; '.join(stage_status(stage).reasons)}")
        parquet = any(f.path.endswith(".parquet") for f in storage.list_files(published))
        return Target(stage, name, published, parquet, manifest)
    output = output or next(iter(stage.outputs))
    if output not in stage.outputs:
        raise DagspecError(f"stage {name} has no output {output!r} (outputs: {', '.join(stage.outputs)})")
    return Target(stage, f"{name}.{output}", stage.output_path(output), stage.outputs[output] == IOType.TABLE, manifest)


def _parquet_files(path: str) -> list[Any]:
    """The Parquet files of a table folder as ``pyarrow.parquet.ParquetFile`` objects, in path order
    (opening one reads its footer only)."""
    import pyarrow.parquet as pq

    files = []
    for info in storage.list_files(path):
        if not info.path.endswith(".parquet"):
            continue
        if storage.is_local(info.path):
            files.append(pq.ParquetFile(storage.local_path(info.path)))
        else:
            import pyarrow.fs as pafs

            fs, inner = pafs.FileSystem.from_uri(info.path)
            files.append(pq.ParquetFile(fs.open_input_file(inner)))
    return files


def _rows(files: list[Any], n: int) -> Iterator[dict[str, Any]]:
    """The first ``n`` rows, reading one row group at a time."""
    left = n
    for parquet in files:
        for group in range(parquet.metadata.num_row_groups):
            if left <= 0:
                return
            table = parquet.read_row_group(group).slice(0, left)
            left -= table.num_rows
            yield from table.to_pylist()


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 3] + "..."


def _list_files(target: Target) -> None:
    for info in storage.list_files(target.path):
        print(f"  {info.size:12,d}  {info.path}")


def cmd_head(args: argparse.Namespace) -> int:
    """Print the schema and the first rows of a committed table output (or list a files output)."""
    target = find_target(args)
    print(f"{target.label} ({target.stage.fingerprint}): {target.path}")
    if not target.table:
        _list_files(target)
        return 0
    files = _parquet_files(target.path)
    if not files:
        print("  (no Parquet files)")
        return 0
    schema = files[0].schema_arrow
    print("schema:")
    for field in schema:
        print(f"  {field.name}: {field.type}")
    rows = list(_rows(files, args.n))
    widths = [max([len(f.name)] + [len(_cell(r.get(f.name))) for r in rows]) for f in schema]
    print("  ".join(f.name.ljust(w) for f, w in zip(schema, widths, strict=True)))
    for row in rows:
        print("  ".join(_cell(row.get(f.name)).ljust(w) for f, w in zip(schema, widths, strict=True)))
    total = sum(f.metadata.num_rows for f in files)
    print(f"({len(rows)} of {total:,d} rows)")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """Print a committed output's row count, columns (type, nulls) and the manifest's metrics."""
    target = find_target(args)
    manifest = target.manifest
    print(f"{target.label} ({target.stage.kind}, {target.stage.fingerprint}): {target.path}")
    print(f"committed {manifest.get('finished', '?')} in {manifest.get('duration_s', '?')} s")
    if target.table:
        files = _parquet_files(target.path)
        total = sum(f.metadata.num_rows for f in files)
        print(f"rows: {total:,d} ({len(files)} Parquet file{'' if len(files) == 1 else 's'})")
        if files:
            print("columns:")
            for field in files[0].schema_arrow:
                print(f"  {field.name:28} {field.type!s:20} nulls: {_null_count(files, field.name)}")
    else:
        _list_files(target)
    metrics = manifest.get("metrics") or {}
    if metrics:
        print("metrics:")
        for key, value in metrics.items():
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            print(f"  {key}: {text}")
    return 0


def _null_count(files: list[Any], name: str) -> str:
    """The column's null count summed over the footers' row-group statistics ("?" where one lacks
    them, or for a nested column, which has several leaf columns)."""
    total = 0
    for parquet in files:
        meta = parquet.metadata
        leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
        if name not in leaves:
            return "?"
        column = leaves.index(name)
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(column).statistics
            if stats is None or not stats.has_null_count:
                return "?"
            total += stats.null_count
    return f"{total:,d}"
