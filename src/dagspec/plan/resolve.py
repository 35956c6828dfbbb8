"""From a spec and a run's template context to fully resolved stages (no Spark, no Airflow).

Each Airflow task resolves the whole pipeline itself when it starts: rendering is deterministic,
and a stage's key holds its upstream outputs' content digests read from their committed manifests,
so a task computes the same fingerprints and paths as the tasks before it without anything passed
through XCom. Before an upstream stage has committed, its readers' fingerprints are provisional
(``ResolvedStage.pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagspec import checkpoint, storage
from dagspec.checkpoint import Checkpoint
from dagspec.errors import StageConfigError
from dagspec.kinds.base import IOType, KindDef, StageParams
from dagspec.kinds.catalog import Catalog, load_catalog
from dagspec.plan.fingerprint import code_hashes, data_identity, fingerprint_of, library_versions, result_conf
from dagspec.spec.exports import storage_root
from dagspec.spec.loader import spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec, parse_ref
from dagspec.spec.params import StageParamsError, render_stage_params, stage_context, stage_param_issues
from dagspec.spec.spec_input import SpecInput
from dagspec.spec.together import claims_of
from dagspec.storage import project_home


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResolvedInput(_Frozen):
    """Where a stage's input role reads from."""

    role: str
    stage: str
    output: str
    fingerprint: str
    stage_dir: str
    path: str
    type: IOType
    outputs: list[str]
    content: str | None = None  # the committed output's content digest (None: not committed yet, or an old one)
    committed: str = ""  # when the upstream checkpoint read was committed
    spec: str = ""  # the dag_id of the spec whose output this is, when it is another spec's

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.stage_dir, self.fingerprint)

    @property
    def key(self) -> str:
        """This input in the reader's cache key: the upstream output's content when known (early
        cutoff: an upstream recomputed to identical bytes leaves the reader's key unchanged), else
        the upstream's fingerprint."""
        if self.content:
            return f"{self.stage}.{self.output}#{self.content}"
        return f"{self.stage}.{self.output}@{self.fingerprint}"


class ResolvedStage(_Frozen):
    """A stage ready to run: rendered params, cache key, fingerprint and every path.

    This model is what crosses from the Airflow side (or the CLI) to the Spark job, as JSON.
    """

    dag_id: str
    name: str
    kind: str
    params: dict[str, Any]
    key: dict[str, Any]
    fingerprint: str
    storage_root: str
    stage_dir: str
    home: str
    inputs: dict[str, ResolvedInput] = Field(default_factory=dict)
    outputs: dict[str, IOType] = Field(default_factory=dict)
    source_files: list[str] = Field(default_factory=list)
    conf: dict[str, str] = Field(default_factory=dict)
    publish_path: str | None = None
    written_name: str = ""  # the stage as written in the spec (a matrix stage for its expansions)
    # the first upstream stages not committed yet: the content of what they lead to is part of
    # this key, so until they run this fingerprint is provisional (each task resolves it again)
    pending: list[str] = Field(default_factory=list)
    # the run's spec params (``force`` left out), kept in the manifest: which run published an export
    run_params: dict[str, Any] = Field(default_factory=dict)
    # the Airflow run resolving it ("" outside a run), kept in the manifest: which run computed a checkpoint
    run_id: str = ""
    # why the stage cannot run: another spec's output it reads has no committed checkpoint yet
    blocked: list[str] = Field(default_factory=list)

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.stage_dir, self.fingerprint)

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint.path

    @property
    def success_path(self) -> str:
        return self.checkpoint.success_path

    def output_path(self, name: str) -> str:
        """Path of one output inside the committed checkpoint."""
        return self.checkpoint.output_path(name)

    def to_json(self) -> str:
        """The single argument a job receives."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> ResolvedStage:
        """Inverse of to_json (validated)."""
        return cls.model_validate_json(text)


def resolve_storage_root(spec: PipelineSpec, home: Path | None = None, override: str | None = None) -> str:
    """The absolute storage root: --storage-root / $DAGSPEC_STORAGE_ROOT, else the spec's."""
    return storage_root(spec, home, override)


def default_context(spec: PipelineSpec, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Template context with the params' defaults (and overrides), as a manual trigger would give."""
    params = {name: p.default for name, p in spec.params.items()}
    params.setdefault(FORCE_PARAM, False)
    params.update(overrides or {})
    return {"params": params}


def render_params(spec: PipelineSpec, name: str, kind: KindDef, context: Mapping[str, Any]) -> StageParams:
    """A stage's params rendered with ``context`` and validated against its kind's model.

    The function ``dagspec validate`` uses with the defaults: a failure reads the same, as
    ``file:line:col: stages.<stage>.params.<field>: <what>`` lines.
    """
    try:
        return render_stage_params(kind.params, spec.stages[name].params, stage_context(spec, name, context))
    except StageParamsError as exc:
        raise StageConfigError("\n".join(str(i) for i in stage_param_issues(spec, name, exc.problems))) from None


def check_matrix_params(spec: PipelineSpec, context: Mapping[str, Any]) -> None:
    """Refuse a run that changes a param a matrix is built from: the DAG's tasks were fixed when the
    spec was parsed, from the param's default."""
    given = context.get("params") or {}
    for name, default in spec.matrix_params().items():
        if name in given and given[name] != default:
            raise StageConfigError(
                f"{spec.source}: param {name!r} shapes a matrix, so its tasks are fixed when the spec is parsed "
                f"(default {default!r}); a run cannot change it (got {given[name]!r}): edit the default instead"
            )


def _stage_conf(spec: PipelineSpec, name: str) -> dict[str, str]:
    stage = spec.stages[name]
    conf = {**spec.spark.conf, **(stage.spark.conf if stage.spark else {})}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()}


def resolve_pipeline(
    spec: PipelineSpec,
    context: Mapping[str, Any],
    *,
    home: Path | None = None,
    storage_root: str | None = None,
    catalog: Catalog | None = None,
) -> dict[str, ResolvedStage]:
    """Render, validate, key and fingerprint every stage, upstream first."""
    home = home or project_home()
    catalog = catalog or load_catalog(home)
    root = resolve_storage_root(spec, home, storage_root)
    check_matrix_params(spec, context)
    run_params = {k: v for k, v in (context.get("params") or {}).items() if k in spec.params and k != FORCE_PARAM}
    resolved: dict[str, ResolvedStage] = {}
    manifests: dict[str, dict[str, Any] | None] = {}
    for name in spec.stage_order():
        stage = spec.stages[name]
        kind = catalog.get(stage.kind)
        if kind is None:
            raise StageConfigError(f"{spec.source}: stage {name!r}: {catalog.unknown_message(stage.kind)}")
        model = render_params(spec, name, kind, context)
        params = model.model_dump(mode="json", by_alias=True)
        inputs: dict[str, ResolvedInput] = {}
        pending: set[str] = set()
        for role, ref in stage.stage_refs().items():
            upstream_name, output = parse_ref(ref)
            upstream = resolved[upstream_name]
            output = output or next(iter(upstream.outputs))
            if upstream_name not in manifests:
                manifests[upstream_name] = upstream.checkpoint.manifest()
            committed = manifests[upstream_name]
            if committed is None or committed.get("fingerprint") != upstream.fingerprint:
                pending.update(upstream.pending or [upstream_name])  # the stages that must run first
                committed = {}
            inputs[role] = ResolvedInput(
                role=role,
                stage=upstream_name,
                output=output,
                fingerprint=upstream.fingerprint,
                stage_dir=upstream.stage_dir,
                path=upstream.output_path(output),
                type=upstream.outputs[output],
                outputs=list(upstream.outputs),
                content=(committed.get("content") or {}).get(output),
                committed=str(committed.get("finished", "")),
            )
        spec_keys: dict[str, str] = {}
        blocked: list[str] = []
        for role, spec_ref in sorted(stage.spec_inputs().items()):
            found = resolve_spec_input(role, spec_ref, root, Path(spec.source).parent if spec.source else None)
            if isinstance(found, str):
                spec_keys[role] = f"{spec_ref.spec}:{spec_ref.output}@none"
                blocked.append(found)
            else:
                spec_keys[role] = f"{spec_ref.spec}:{found.key}"
                inputs[role] = found
        data: dict[str, str] = {}
        files: list[str] = []
        if kind.source_paths is not None:
            data, files = data_identity(kind.source_paths(model, frozenset(stage.inputs)), home)
        conf = _stage_conf(spec, name)
        code = code_hashes(kind.module)
        key = {
            "kind": kind.name,
            "params": params,
            "code": code,
            "libraries": library_versions(tuple(code)),
            "data": data,
            "upstream": {role: i.key for role, i in sorted(inputs.items()) if not i.spec},
            "conf": result_conf(conf),
        }
        if spec_keys:  # only then: the keys of stages that read no other spec keep their fingerprints
            key["upstream_specs"] = spec_keys
        published = kind.published_path(model)
        resolved[name] = ResolvedStage(
            dag_id=spec.dag_id,
            name=name,
            kind=kind.name,
            params=params,
            key=key,
            fingerprint=fingerprint_of(key),
            storage_root=root,
            stage_dir=storage.join_under(root, f"{spec.dag_id}/{name}"),
            home=str(home),
            inputs=inputs,
            outputs=dict(kind.output_types(model)),
            source_files=files,
            conf=conf,
            publish_path=checkpoint.export_target(root, published) if published else None,
            written_name=spec.written_stage(name),
            pending=sorted(pending),
            run_params=run_params,
            run_id=str(context.get("run_id") or ""),
            blocked=blocked,
        )
    return resolved


def resolve_spec_input(role: str, ref: SpecInput, root: str, folder: Path | None = None) -> ResolvedInput | str:
    """Another spec's output as the checkpoint its stage last committed (``_LATEST``), or why it
    cannot be read: a message naming the spec to run first (and its file, found in ``folder``)."""
    stage_dir = storage.join_under(root, f"{ref.spec}/{ref.stage}")
    found = checkpoint.latest(stage_dir)
    manifest = found.manifest() if found is not None else None
    if found is None or manifest is None:
        upstream = _spec_file(folder, ref.spec) if folder is not None else None
        how = f" (`dagspec run {_shown(upstream)}`)" if upstream else ""
        return (
            f"input {role!r} reads {ref.asset}, but spec {ref.spec!r} has no committed checkpoint of stage "
            f"{ref.stage!r} under {root}: run spec {ref.spec!r} first{how}"
        )
    outputs = manifest.get("outputs") or {}
    if ref.output_name not in outputs:
        return (
            f"input {role!r} reads {ref.asset}, but the last committed checkpoint of {ref.spec}.{ref.stage} "
            f"({found.path}) has no output {ref.output_name!r} (it has: {', '.join(outputs) or 'none'}); "
            f"run spec {ref.spec!r} again"
        )
    described = outputs[ref.output_name]
    type_ = described.get("type", IOType.TABLE.value) if isinstance(described, Mapping) else IOType.TABLE.value
    return ResolvedInput(
        role=role,
        stage=ref.stage,
        output=ref.output_name,
        fingerprint=found.fingerprint,
        stage_dir=stage_dir,
        path=found.output_path(ref.output_name),
        type=IOType(type_),
        outputs=list(outputs),
        content=(manifest.get("content") or {}).get(ref.output_name),
        committed=str(manifest.get("finished", "")),
        spec=ref.spec,
    )


def _spec_file(folder: Path, dag_id: str) -> Path | None:
    """The spec file of ``folder`` whose DAG is ``dag_id`` (its ``dag_id:``, else its file's stem)."""
    return next((c.path for c in claims_of(spec_files(folder), str) if c.dag_id == dag_id), None)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
