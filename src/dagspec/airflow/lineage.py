"""A stage's OpenLineage: its inputs and outputs as datasets, from committed manifests.

Airflow's OpenLineage provider asks the operator for ``get_openlineage_facets_on_complete`` when a
task ends and puts what it returns into the task's COMPLETE (or FAIL) event. Every fact here comes
from what the checkpoints recorded when they were committed, so a checkpoint hit reports exactly
what the run that computed it would have reported:

- an output is its folder in the stage's checkpoint, with the table's schema, its rows
  (``outputStatistics``) and its content digest as the dataset's version;
- an input is the upstream output it reads, with the same facts from the upstream manifest
  (``inputStatistics``), or one source file of a ``read``-like stage, versioned by the size and
  modification time the cache key holds;
- a ``check`` stage's expectations are ``dataQualityAssertions`` (and its row count
  ``dataQualityMetrics``) of the table it checked; an ``evaluate`` stage's report is the
  ``dagspec_evaluation`` facet of its ``report`` output (no standard facet holds model metrics);
- an ``export``'s published folder is an output too, versioned by the stage's fingerprint (which its
  export marker records), with its rows and (Parquet) its input's columns.

Each dataset is named as OpenLineage names files (``file`` + absolute path locally, the URI's
scheme and authority + path elsewhere), and carries a symlink ``dagspec://<dag_id>`` /
``<stage>/<output>``: the stable name of an output across fingerprints (the Airflow asset's URI).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    data_quality_assertions_dataset,
    data_quality_metrics_input_dataset,
    dataset_version_dataset,
    input_statistics_input_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    symlinks_dataset,
)
from openlineage.client.generated.base import DatasetFacet, InputDatasetFacet, OutputDatasetFacet
from openlineage.client.naming.dataset import LocalFileSystem

from dagspec import storage
from dagspec.kinds.base import IOType
from dagspec.kinds.evaluation_report import METRICS_FILE, parse_evaluation_report
from dagspec.plan.resolve import ResolvedInput, ResolvedStage

DAGSPEC_NAMESPACE = "dagspec://"
# the kinds whose facts get a facet of their own, and the output that carries the evaluation
CHECK_KIND = "check"
EVALUATE_KIND = "evaluate"
EVALUATE_REPORT = "report"
EVALUATION_FACET = "dagspec_evaluation"
# dagspec has no published site: the facet's schema is docs/openlineage/EvaluationDatasetFacet.json, named by its $id
EVALUATION_SCHEMA_URL = "urn:dagspec:openlineage:facets:1-0-0:EvaluationDatasetFacet.json#/$defs/EvaluationDatasetFacet"
# object stores name an object without the leading slash; filesystems (hdfs, file) keep the path absolute
_OBJECT_STORES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs"})


@attr.define
class EvaluationDatasetFacet(DatasetFacet):
    """An ``evaluate`` stage's report (``metrics.json``): one model's classification metrics on one table."""

    model: str | None
    flavor: str
    task: str
    rows: int
    classes: list[int]
    metrics: dict[str, float | None]  # roc_auc, accuracy, log_loss
    intervals: dict[str, list[float]]  # metric -> [low, high] at intervalLevel (only those computed)
    intervalLevel: float  # noqa: N815 (OpenLineage's field style)
    perClass: dict[str, dict[str, Any]]  # noqa: N815 class value -> name, support, precision, recall, rocAuc

    @staticmethod
    def _get_schema() -> str:
        return EVALUATION_SCHEMA_URL


def dataset_name(path: str) -> tuple[str, str]:
    """(namespace, name) of a file or folder, as OpenLineage's naming conventions say."""
    if storage.is_local(path):
        local = LocalFileSystem(path=storage.local_path(path))
        return local.get_namespace(), local.get_name()
    parts = urlsplit(path)
    name = parts.path.lstrip("/") if parts.scheme in _OBJECT_STORES else parts.path
    return f"{parts.scheme}://{parts.netloc}", name or "/"


def schema_fields(simple: str) -> list[schema_dataset.SchemaDatasetFacetFields]:
    """The fields of a Spark ``simpleString`` schema (``struct<a:int,b:struct<c:double>>``), nested
    structs as nested fields. Column names holding ``<``, ``>``, ``,`` or ``:`` are not told apart."""
    inner = simple[len("struct<") : -1] if simple.startswith("struct<") and simple.endswith(">") else ""
    fields = []
    for position, part in enumerate(_top_level(inner, ","), start=1):
        colon = max((i for i, c in _depth_zero(part) if c == ":"), default=-1)  # names may hold ':', types not
        if colon < 0:
            continue
        name, type_ = part[:colon], part[colon + 1 :]
        fields.append(
            schema_dataset.SchemaDatasetFacetFields(
                name=name, type=type_, ordinal_position=position, fields=schema_fields(type_)
            )
        )
    return fields


def _depth_zero(text: str) -> list[tuple[int, str]]:
    """(index, character) of ``text``'s characters outside any ``<...>`` or ``(...)``."""
    found, depth = [], 0
    for i, c in enumerate(text):
        depth += (c in "<(") - (c in ">)")
        if depth == 0 and c not in ">)":
            found.append((i, c))
    return found


def _top_level(text: str, separator: str) -> list[str]:
    cuts = [i for i, c in _depth_zero(text) if c == separator]
    bounds = [-1, *cuts, len(text)]
    return [text[a + 1 : b] for a, b in itertools.pairwise(bounds) if text[a + 1 : b]]


def _table_facets(described: Any, content: str | None) -> dict[str, DatasetFacet]:
    """The facets every committed output has: its schema (tables) and its content digest as its version."""
    facets: dict[str, DatasetFacet] = {}
    schema = described.get("schema") if isinstance(described, Mapping) else None
    if schema:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=schema_fields(str(schema)))
    if content:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=content)
    return facets


def _symlink(dag_id: str, stage: str, output: str) -> symlinks_dataset.SymlinksDatasetFacet:
    return symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[
            symlinks_dataset.Identifier(
                namespace=f"{DAGSPEC_NAMESPACE}{dag_id}", name=f"{stage}/{output}", type="STAGE_OUTPUT"
            )
        ]
    )


def upstream_dataset(dag_id: str, source: ResolvedInput) -> InputDataset:
    """The upstream output an input role reads, with what its committed manifest recorded."""
    manifest = source.checkpoint.manifest() or {}
    described = (manifest.get("outputs") or {}).get(source.output)
    facets = _table_facets(described, source.content)
    facets["symlinks"] = _symlink(source.spec or dag_id, source.stage, source.output)
    input_facets: dict[str, InputDatasetFacet] = {}
    rows = (manifest.get("rows") or {}).get(source.output)
    if isinstance(rows, int) and source.type == IOType.TABLE:
        input_facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=rows)
    namespace, name = dataset_name(source.path)
    return InputDataset(namespace=namespace, name=name, facets=facets, inputFacets=input_facets)


def source_datasets(stage: ResolvedStage) -> list[InputDataset]:
    """The files a source stage reads, each versioned by the identity its cache key holds (size:mtime)."""
    identities: Mapping[str, Any] = stage.key.get("data") or {}
    found = []
    for path in stage.source_files:
        identity = str(identities.get(path, ""))
        size = identity.split(":", 1)[0]
        facets: dict[str, DatasetFacet] = {}
        if identity:
            facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=identity)
        input_facets: dict[str, InputDatasetFacet] = {}
        if size.isdigit():
            input_facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                size=int(size), fileCount=1
            )
        namespace, name = dataset_name(path)
        found.append(InputDataset(namespace=namespace, name=name, facets=facets, inputFacets=input_facets))
    return found


def check_facets(stage: ResolvedStage, metrics: Mapping[str, Any]) -> dict[str, InputDatasetFacet]:
    """A check stage's expectations as assertions on the table it checked, and its row count."""
    severity = "error" if metrics.get("severity") == "fail" else "warn"
    columns = stage.params_json().get("columns") or {}
    assertions = []
    for result in metrics.get("results") or []:
        rule, _, expected = str(result.get("rule", "")).partition(" ")
        column = str(result.get("column", ""))
        whole = column == "rows" and "rows" not in columns  # the row-count bounds
        assertions.append(
            data_quality_assertions_dataset.Assertion(
                assertion="row_count" if whole else rule,
                success=bool(result.get("passed")),
                column=None if whole else column,
                severity=severity,
                expected=(str(result.get("rule")) if whole else expected) or None,
                actual=str(result.get("observed", "")) or None,
            )
        )
    facets: dict[str, InputDatasetFacet] = {
        "dataQualityAssertions": data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=assertions
        )
    }
    rows = metrics.get("check_rows")
    if isinstance(rows, int):
        facets["dataQualityMetrics"] = data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
            columnMetrics={}, rowCount=rows
        )
    return facets


def evaluation_facet(report_dir: str) -> EvaluationDatasetFacet | None:
    """The evaluation report of an ``evaluate`` stage's committed ``report`` folder (None: none there)."""
    text = storage.read_text(f"{report_dir}/{METRICS_FILE}")
    if text is None:
        return None
    report = parse_evaluation_report(text, f"{report_dir}/{METRICS_FILE}")
    intervals = {
        metric: list(found)
        for metric in ("roc_auc", "accuracy", "log_loss")
        if (found := report.interval(metric)) is not None
    }
    auc = report.per_class_values("roc_auc")
    per_class = {
        key: {
            "name": report.class_name(key),
            "support": counts.support,
            "precision": counts.precision,
            "recall": counts.recall,
            **({"rocAuc": auc[key]} if key in auc else {}),
        }
        for key, counts in report.per_class.items()
    }
    return EvaluationDatasetFacet(
        model=report.model,
        flavor=report.flavor,
        task=report.task,
        rows=report.rows,
        classes=list(report.classes),
        metrics={metric: report.value(metric) for metric in ("roc_auc", "accuracy", "log_loss")},
        intervals=intervals,
        intervalLevel=report.intervals.level,
        perClass=per_class,
    )


def output_datasets(stage: ResolvedStage, manifest: Mapping[str, Any]) -> list[OutputDataset]:
    """Every output of a committed stage, with its schema, rows and content digest."""
    found = []
    for output, type_ in stage.outputs.items():
        path = stage.output_path(output)
        facets = _table_facets((manifest.get("outputs") or {}).get(output), (manifest.get("content") or {}).get(output))
        facets["symlinks"] = _symlink(stage.dag_id, stage.name, output)
        if stage.kind == EVALUATE_KIND and output == EVALUATE_REPORT:
            evaluation = evaluation_facet(path)
            if evaluation is not None:
                facets[EVALUATION_FACET] = evaluation
        output_facets: dict[str, OutputDatasetFacet] = {}
        rows = (manifest.get("rows") or {}).get(output)
        if isinstance(rows, int) and type_ == IOType.TABLE:
            output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=rows
            )
        namespace, name = dataset_name(path)
        found.append(OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets))
    return found


def published_dataset(stage: ResolvedStage, manifest: Mapping[str, Any]) -> OutputDataset | None:
    """The folder an ``export`` published, versioned by the fingerprint its marker records (the
    checkpoint holds no copy of it to digest); a Parquet export has its input's columns."""
    if not stage.publish_path:
        return None
    facets: dict[str, DatasetFacet] = {
        "version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=stage.fingerprint)
    }
    source = stage.inputs.get("data")
    if stage.params_json().get("format") == "parquet" and source is not None:
        described = ((source.checkpoint.manifest() or {}).get("outputs") or {}).get(source.output)
        facets.update({k: v for k, v in _table_facets(described, None).items() if k == "schema"})
    output_facets: dict[str, OutputDatasetFacet] = {}
    rows = (manifest.get("metrics") or {}).get("rows")
    if isinstance(rows, int):
        output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=rows
        )
    namespace, name = dataset_name(stage.publish_path)
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets)


def stage_lineage(stage: ResolvedStage) -> OperatorLineage[Any, Any]:
    """The lineage of a stage: its inputs always, its outputs once its checkpoint is committed; a
    partitioned stage's is that of every partition the task stands for."""
    if stage.partitioned:
        found: OperatorLineage[Any, Any] = OperatorLineage()
        for part in stage.partitions.values():
            found = found.merge(stage_lineage(part))
        return OperatorLineage(inputs=_unique(found.inputs), outputs=_unique(found.outputs))
    committed = stage.checkpoint.manifest()
    manifest = committed if committed is not None and committed.get("fingerprint") == stage.fingerprint else None
    inputs = []
    for role, source in sorted(stage.inputs.items()):
        # a window of a partitioned stage reads each of its parts' checkpoints
        for read in source.parts or [source]:
            dataset = upstream_dataset(stage.dag_id, read)
            if manifest is not None and stage.kind == CHECK_KIND and role == "data":
                checks = check_facets(stage, manifest.get("metrics") or {})
                dataset.inputFacets = {**(dataset.inputFacets or {}), **checks}
            inputs.append(dataset)
    inputs += source_datasets(stage)
    outputs = output_datasets(stage, manifest) if manifest is not None else []
    published = published_dataset(stage, manifest) if manifest is not None else None
    outputs += [published] if published is not None else []
    return OperatorLineage(inputs=inputs, outputs=outputs)


def _unique(datasets: list[Any]) -> list[Any]:
    """Each dataset once (partitions of one stage may read the same upstream output)."""
    return list({(d.namespace, d.name): d for d in datasets}.values())
