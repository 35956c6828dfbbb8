"""From a spec and a run's template context to fully resolved stages (no Spark, no Airflow).

Each Airflow task resolves the whole pipeline itself: rendering is deterministic, so every task of
a run computes the same fingerprints and paths without passing anything through XCom.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import ValidationError

import dagspec
from dagspec.errors import StageConfigError, StorageError
from dagspec.registry import IOType, get_kind
from dagspec.spec import FORCE_PARAM, PipelineSpec, parse_ref

_JINJA = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
SUCCESS_MARKER = "_SUCCESS"
MANIFEST = "manifest.json"


def project_home() -> Path:
    """The directory relative spec paths are resolved against ($DAGSPEC_HOME, else the cwd)."""
    return Path(os.environ.get("DAGSPEC_HOME") or os.getcwd()).resolve()


def is_uri(path: str) -> bool:
    """True for ``scheme://...`` paths (hdfs://, s3a://, file://)."""
    return bool(_URI.match(path))


def resolve_storage_root(spec: PipelineSpec, home: Path | None = None, override: str | None = None) -> str:
    """The absolute storage root: --storage-root / $DAGSPEC_STORAGE_ROOT, else the spec's."""
    root = override or os.environ.get("DAGSPEC_STORAGE_ROOT") or spec.storage.root
    if is_uri(root):
        return root.rstrip("/")
    return str(((home or project_home()) / root).resolve())


def resolve_input_path(path: str, home: Path | None = None) -> str:
    """A read path: URIs as they are, relative local paths against the project directory."""
    if is_uri(path) or os.path.isabs(path):
        return path
    return str((home or project_home()) / path)


def join_under(root: str, relative: str) -> str:
    """``root/relative``, refusing anything that would leave ``root``."""
    parts = [p for p in relative.replace("\\", "/").split("/") if p not in ("", ".")]
    if is_uri(relative) or relative.startswith("/") or ".." in parts:
        raise StorageError(f"path {relative!r} would leave the storage root {root!r}")
    return "/".join([root.rstrip("/"), *parts])


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every Jinja string inside ``value`` (sandboxed: templates cannot run code)."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        return _JINJA.from_string(value).render(context)
    if isinstance(value, Mapping):
        return {k: render(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, context) for v in value]
    return value


@dataclass(frozen=True)
class ResolvedInput:
    """Where a stage's input role reads from."""

    role: str
    stage: str
    output: str
    fingerprint: str
    path: str
    type: str


@dataclass(frozen=True)
class ResolvedStage:
    """A stage ready to run: rendered params, fingerprint and every path. JSON-serializable."""

    dag_id: str
    name: str
    kind: str
    kind_version: str
    params: dict[str, Any]
    fingerprint: str
    storage_root: str
    stage_dir: str
    checkpoint_dir: str
    home: str
    inputs: dict[str, ResolvedInput] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)

    def output_path(self, name: str) -> str:
        """Path of one output inside the committed checkpoint."""
        return f"{self.checkpoint_dir}/{name}"

    @property
    def success_path(self) -> str:
        """The marker whose presence makes the checkpoint trusted."""
        return f"{self.checkpoint_dir}/{SUCCESS_MARKER}"

    def to_json(self) -> str:
        """The single argument a job receives."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResolvedStage:
        """Inverse of to_json."""
        data = json.loads(text)
        data["inputs"] = {role: ResolvedInput(**i) for role, i in data["inputs"].items()}
        return cls(**data)


def fingerprint(kind: str, kind_version: str, params: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """Hash of what determines a stage's output: kind, versions, rendered params, upstream fingerprints."""
    payload = json.dumps(
        {
            "kind": kind,
            "kind_version": kind_version,
            "code_version": dagspec.__version__,
            "params": params,
            "inputs": dict(sorted(inputs.items())),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def default_context(spec: PipelineSpec, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Template context with the params' defaults (and overrides), as a manual trigger would give."""
    params = {name: p.default for name, p in spec.params.items()}
    params.setdefault(FORCE_PARAM, False)
    params.update(overrides or {})
    return {"params": params}


def resolve_pipeline(
    spec: PipelineSpec,
    context: Mapping[str, Any],
    *,
    home: Path | None = None,
    storage_root: str | None = None,
) -> dict[str, ResolvedStage]:
    """Render, validate and fingerprint every stage, upstream first."""
    home = home or project_home()
    root = resolve_storage_root(spec, home, storage_root)
    resolved: dict[str, ResolvedStage] = {}
    for name in spec.stage_order():
        stage = spec.stages[name]
        kind = get_kind(stage.kind)
        if kind is None:  # the loader rejects this; guard for hand-built specs
            raise StageConfigError(f"stage {name!r}: unknown kind {stage.kind!r}")
        try:
            rendered = render(stage.params, context)
        except TemplateError as exc:
            raise StageConfigError(f"{spec.source}: stage {name!r}: cannot render params: {exc}") from None
        try:
            model = kind.params.model_validate(rendered)
        except ValidationError as exc:
            problems = "; ".join(
                f"params.{'.'.join(str(p) for p in e['loc'])}: {e['msg']} (got {e.get('input')!r})"
                for e in exc.errors()
            )
            raise StageConfigError(f"{spec.source}: stage {name!r}: {problems}") from None
        params = model.model_dump(mode="json", by_alias=True)
        inputs: dict[str, ResolvedInput] = {}
        for role, ref in stage.inputs.items():
            upstream_name, output = parse_ref(ref)
            upstream = resolved[upstream_name]
            output = output or next(iter(upstream.outputs))
            inputs[role] = ResolvedInput(
                role=role,
                stage=upstream_name,
                output=output,
                fingerprint=upstream.fingerprint,
                path=upstream.output_path(output),
                type=upstream.outputs[output],
            )
        fp = fingerprint(
            kind.name, kind.version, params, {r: f"{i.stage}.{i.output}@{i.fingerprint}" for r, i in inputs.items()}
        )
        stage_dir = join_under(root, f"{spec.dag_id}/{name}")
        resolved[name] = ResolvedStage(
            dag_id=spec.dag_id,
            name=name,
            kind=kind.name,
            kind_version=kind.version,
            params=params,
            fingerprint=fp,
            storage_root=root,
            stage_dir=stage_dir,
            checkpoint_dir=f"{stage_dir}/{fp}",
            home=str(home),
            inputs=inputs,
            outputs={k: IOType(v).value for k, v in kind.output_types(model).items()},
        )
    return resolved


def checkpoint_exists(stage: ResolvedStage) -> bool:
    """Is there a committed checkpoint (``_SUCCESS``) for this exact fingerprint?"""
    path = stage.success_path
    if path.startswith("file://"):
        path = path[len("file://") :]
    if not is_uri(path):
        return os.path.exists(path)
    import fsspec  # only for remote storage roots

    fs, fs_path = fsspec.core.url_to_fs(path)
    return bool(fs.exists(fs_path))


def read_manifest(stage: ResolvedStage) -> dict[str, Any] | None:
    """The committed manifest of a stage, or None (local storage only)."""
    path = Path(stage.checkpoint_dir.removeprefix("file://")) / MANIFEST
    if is_uri(stage.checkpoint_dir) and not stage.checkpoint_dir.startswith("file://"):
        return None
    if not (path.parent / SUCCESS_MARKER).exists():
        return None
    return json.loads(path.read_text())
