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

from dagspec import checkpoint, storage
from dagspec.errors import StageConfigError
from dagspec.kinds.base import IOType, KindDef, StageParams
from dagspec.kinds.catalog import Catalog, load_catalog
from dagspec.plan.fingerprint import code_hashes, data_identity, fingerprint_of, library_versions, result_conf
from dagspec.plan.partitions import Partition, list_partitions, run_scope
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.plan.resolved import ResolvedInput as ResolvedInput  # re-exported
from dagspec.plan.resolved import ResolvedStage as ResolvedStage  # re-exported: what callers import from here
from dagspec.spec.exports import storage_root
from dagspec.spec.loader import spec_files
from dagspec.spec.models import FORCE_PARAM, PipelineSpec, parse_ref
from dagspec.spec.params import StageParamsError, loaded_params, render_stage_params, stage_context, stage_param_issues
from dagspec.spec.partitions import PartitionWindow
from dagspec.spec.spec_input import SpecInput
from dagspec.spec.together import claims_of
from dagspec.storage import project_home


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
    ``file:line:col: stages.<stage>.params.<field>: <what>`` lines. Params without a template are
    the model the loader validated (``loaded_params``): validated once per process.
    """
    loaded = loaded_params(spec, name, kind.params)
    if loaded is not None:
        return loaded
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
    """Render, validate, key and fingerprint every stage, upstream first (a partitioned stage: each
    of its partitions, ``dagspec.plan.partitions``)."""
    home = home or project_home()
    catalog = catalog or load_catalog(home)
    check_matrix_params(spec, context)
    run_params = {k: v for k, v in (context.get("params") or {}).items() if k in spec.params and k != FORCE_PARAM}
    planner = _Planner(spec, context, home, resolve_storage_root(spec, home, storage_root), catalog, run_params)
    for name in spec.stage_order():
        stage = spec.stages[name]
        kind = catalog.get(stage.kind)
        if kind is None:
            raise StageConfigError(f"{spec.source}: stage {name!r}: {catalog.unknown_message(stage.kind)}")
        planner.resolved[name] = planner.partitioned(name, kind) if stage.partitioned else planner.stage(name, kind)
    return planner.resolved


class _Planner:
    """The state of one resolution: the stages resolved so far and the manifests read."""

    def __init__(
        self,
        spec: PipelineSpec,
        context: Mapping[str, Any],
        home: Path,
        root: str,
        catalog: Catalog,
        run_params: dict[str, Any],
    ) -> None:
        self.spec, self.context, self.home, self.root, self.catalog = spec, context, home, root, catalog
        self.run_params = run_params
        self.resolved: dict[str, ResolvedStage] = {}
        self.manifests: dict[str, dict[str, Any] | None] = {}
        self.scope = run_scope(spec, context)
        self._partitions: list[Partition] | None = None

    def partitions(self) -> tuple[list[Partition], list[str]]:
        """The spec's partitions, and the stages to wait for when they are not known yet (their
        files are the output of ``partitions.of``, which has not committed)."""
        of = self.spec.partitions.of if self.spec.partitions else None
        if of is None:
            if self._partitions is None:
                self._partitions = list_partitions(self.spec, self.context, self.home)
            return self._partitions, []
        source = self.resolved[of]
        manifest = source.checkpoint.manifest()
        if manifest is None or manifest.get("fingerprint") != source.fingerprint:
            return [], source.pending or [of]
        if self._partitions is None:
            folder = source.output_path(next(iter(source.outputs)))
            self._partitions = list_partitions(self.spec, self.context, self.home, base=folder)
        return self._partitions, []

    def _input(self, role: str, upstream: ResolvedStage, output: str, pending: set[str]) -> ResolvedInput:
        """An input reading one committed (or to be committed) checkpoint: the upstream's, or its partition's."""
        cache = f"{upstream.stage_dir}@{upstream.fingerprint}"
        if cache not in self.manifests:
            self.manifests[cache] = upstream.checkpoint.manifest()
        committed = self.manifests[cache]
        if committed is None or committed.get("fingerprint") != upstream.fingerprint:
            pending.update(upstream.pending or [upstream.name])  # the stages that must run first
            committed = {}
        return ResolvedInput.of(
            role,
            upstream,
            output,
            path=upstream.output_path(output),
            content=(committed.get("content") or {}).get(output),
            committed=str(committed.get("finished", "")),
            partition=upstream.partition,
        )

    def _window(self, role: str, upstream: ResolvedStage, output: str, reader: str, pending: set[str]) -> ResolvedInput:
        """An input reading some partitions of a partitioned stage (all of them, or its window)."""
        window = self.spec.stages[reader].windows().get(role) or PartitionWindow(stage=upstream.name)
        keys = window.select(list(upstream.partitions), self.scope.run_key)
        parts = [self._input(role, upstream.partitions[k], output, pending) for k in keys]
        if not upstream.partitions:  # its partitions are not known yet: what lists them runs first
            pending.update(upstream.pending)
        return ResolvedInput.of(role, upstream, output, path="", parts=parts)

    def stage(self, name: str, kind: KindDef, partition: Partition | None = None) -> ResolvedStage:
        """One stage, or one partition of a partitioned stage."""
        spec, stage = self.spec, self.spec.stages[name]
        context = {**self.context, "partition": partition.context()} if partition else self.context
        model = render_params(spec, name, kind, context)
        inputs: dict[str, ResolvedInput] = {}
        pending: set[str] = set()
        for role, ref in stage.stage_refs().items():
            upstream_name, output = parse_ref(ref)
            upstream = self.resolved[upstream_name]
            output = output or next(iter(upstream.outputs))
            if upstream.partitioned and partition is not None:
                inputs[role] = self._input(role, upstream.partitions[partition.key], output, pending)
            elif upstream.partitioned:
                inputs[role] = self._window(role, upstream, output, name, pending)
            else:
                inputs[role] = self._input(role, upstream, output, pending)
        spec_keys: dict[str, str] = {}
        blocked: list[str] = []
        for role, spec_ref in sorted(stage.spec_inputs().items()):
            found = resolve_spec_input(role, spec_ref, self.root, Path(spec.source).parent if spec.source else None)
            if isinstance(found, str):
                spec_keys[role] = f"{spec_ref.spec}:{spec_ref.output}@none"
                blocked.append(found)
            else:
                spec_keys[role] = f"{spec_ref.spec}:{found.key}"
                inputs[role] = found
        data: dict[str, str] = {}
        files: list[str] = []
        if kind.source_paths is not None:
            data, files = data_identity(kind.source_paths(model, frozenset(stage.inputs)), self.home)
        conf = _stage_conf(spec, name)
        code = code_hashes(kind.module)
        key = {
            "kind": kind.name,
            "params": model.model_dump(mode="json", by_alias=True),
            "code": code,
            "libraries": library_versions(tuple(code)),
            "data": data,
            "upstream": {role: i.key for role, i in sorted(inputs.items()) if not i.spec},
            "conf": result_conf(conf),
        }
        if spec_keys:  # only then: the keys of stages that read no other spec keep their fingerprints
            key["upstream_specs"] = spec_keys
        if partition is not None:  # only then, likewise
            key["partition"] = partition.key
        published = kind.published_path(model)
        folder = f"{spec.dag_id}/{name}" + (f"/{PARTITIONS_DIR}/{partition.key}" if partition else "")
        return self._resolved(
            name,
            kind,
            model,
            key,
            folder,
            inputs=inputs,
            source_files=files,
            conf=conf,
            publish_path=checkpoint.export_target(self.root, published) if published else None,
            pending=sorted(pending),
            blocked=blocked,
            partition=partition.key if partition else "",
        )

    def _resolved(
        self, name: str, kind: KindDef, model: StageParams, key: dict[str, Any], folder: str, **rest: Any
    ) -> ResolvedStage:
        """A stage of this spec with its fingerprint ``key``, stored in ``folder`` under the root; ``rest``:
        the fields that differ between a stage (or partition) and a partitioned stage."""
        return ResolvedStage(
            dag_id=self.spec.dag_id,
            name=name,
            kind=kind.name,
            params=model,
            key=key,
            fingerprint=fingerprint_of(key),
            storage_root=self.root,
            stage_dir=storage.join_under(self.root, folder),
            home=str(self.home),
            outputs=dict(kind.output_types(model)),
            written_name=self.spec.written_stage(name),
            run_params=self.run_params,
            run_id=str(self.context.get("run_id") or ""),
            **rest,
        )

    def partitioned(self, name: str, kind: KindDef) -> ResolvedStage:
        """A partitioned stage: each partition resolved on its own; the stage stands for them all.

        A partition the run may not compute (outside its scope) is kept only when committed."""
        upstreams = [self.resolved[parse_ref(ref)[0]] for ref in self.spec.stages[name].stage_refs().values()]
        known = [set(u.partitions) for u in upstreams if u.partitioned]
        parts: dict[str, ResolvedStage] = {}
        skipped: list[str] = []
        listed, waiting = self.partitions()
        waiting += [n for u in upstreams if u.partitioned and not u.partitions for n in u.pending]
        for partition in listed:
            if any(partition.key not in k for k in known):
                continue  # an upstream partition the run left out: so is this one
            resolved = self.stage(name, kind, partition)
            if not self.scope.allows(partition.key) and not resolved.checkpoint.state(resolved.outputs).done:
                skipped.append(partition.key)
                continue
            parts[partition.key] = resolved
        model = render_params(self.spec, name, kind, self.context)  # a stand-in partition: what the kind is
        key = {"kind": kind.name, "partitions": {k: p.fingerprint for k, p in parts.items()}}
        return self._resolved(
            name,
            kind,
            model,
            key,
            f"{self.spec.dag_id}/{name}",
            conf=_stage_conf(self.spec, name),
            pending=sorted({n for p in parts.values() for n in p.pending} | set(waiting)),
            blocked=sorted({b for p in parts.values() for b in p.blocked}),
            partitioned=True,
            partitions=parts,
            skipped=skipped,
            parallel=self.spec.partitions.parallel if self.spec.partitions else 1,
        )


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
