"""Why a stage will run: its checkpoint's state, and what changed since the last committed one.

Each reason of a stage that runs starts with one of: ``new``, ``params changed``, ``code changed``,
``input data changed``, ``upstream changed``, ``upstream spec changed``, ``upstream not committed
yet``, ``upstream spec not committed``, ``spark conf changed``, ``forced``, ``broken``, ``published
by another run``. A ``done`` stage may say ``upstream
recomputed, same content: reused``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dagspec import checkpoint, storage
from dagspec.plan.partitions import shown_keys
from dagspec.plan.resolve import ResolvedStage
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spec.partitions import order_keys

MAX_REASONS = 12


@dataclass(frozen=True)
class StageStatus:
    """``done`` (a trustworthy checkpoint: the stage is skipped) or ``missing`` (it runs), and why."""

    state: str
    reasons: list[str] = field(default_factory=list)
    todo: list[str] = field(default_factory=list)  # a partitioned stage: the partitions that run

    @property
    def done(self) -> bool:
        return self.state == "done"

    def line(self, stage: ResolvedStage) -> str:
        """The one line the CLI and the task log print about a stage."""
        why = f": {'; '.join(self.reasons)}" if self.reasons else ""
        return f"stage {stage.name} ({stage.kind}, {stage.fingerprint}): {self.state}{why}"


def is_hit(stage: ResolvedStage) -> bool:
    """A trustworthy checkpoint and, for a publishing stage, its data published from this fingerprint."""
    return stage_status(stage).done


def stage_status(stage: ResolvedStage, *, forced: bool = False) -> StageStatus:
    """Will this stage run, and why."""
    if stage.partitioned:
        return partitioned_status(stage, forced=forced)
    if forced:
        return StageStatus("missing", ["forced (param force=true)"])
    if stage.blocked:
        return StageStatus("missing", [f"upstream spec not committed: {why}" for why in stage.blocked])
    found = stage.checkpoint.state(stage.outputs)
    if found.state == "broken":
        return StageStatus("missing", [f"broken: {found.detail}"])
    if found.done:
        if stage.publish_path is not None:
            published = checkpoint.published_fingerprint(stage.publish_path)
            if published is None:
                return StageStatus("missing", [f"broken: export {stage.publish_path} holds nothing from dagspec"])
            if published != stage.fingerprint:
                return StageStatus("missing", [published_by_other_run(stage, published)])
        return StageStatus("done", reused_upstreams(stage))
    previous = latest_manifest(stage)
    old_key = previous.get("key") if previous is not None else None
    if stage.pending:
        others = key_changes(old_key, stage.key) if isinstance(old_key, Mapping) else []
        waiting = (
            f"upstream not committed yet: {', '.join(stage.pending)} runs first (this key holds the content "
            "upstream commits: the stage stays done if that is the same bytes)"
        )
        return StageStatus("missing", [waiting, *(r for r in others if not r.startswith("upstream"))][:MAX_REASONS])
    if previous is None:
        return StageStatus("missing", ["new"])
    if not isinstance(old_key, Mapping):
        return StageStatus("missing", ["new: the last checkpoint of this stage predates recorded cache keys"])
    reasons = key_changes(old_key, stage.key)
    return StageStatus("missing", reasons[:MAX_REASONS] or ["new: no difference in the recorded key"])


def partitioned_status(stage: ResolvedStage, *, forced: bool = False) -> StageStatus:
    """A partitioned stage is done when every partition the run reads is; else the partitions that
    run, and why the first few do."""
    if stage.pending and not stage.partitions:  # the files that make its partitions are not there yet
        return StageStatus(
            "missing",
            [f"upstream not committed yet: {', '.join(stage.pending)} runs first (its files are the partitions)"],
        )
    states = {key: stage_status(part, forced=forced) for key, part in stage.partitions.items()}
    todo = [key for key, state in states.items() if not state.done]
    new = [key for key in todo if states[key].reasons[:1] == ["new"]]
    left = f"; {len(stage.skipped)} outside the run's scope and not committed: left alone" if stage.skipped else ""
    gone = deleted_partitions(stage)
    if gone:  # a file removed: readers of a window that held it read the partitions there are now
        left += f"; deleted (no longer listed, kept until `dagspec gc`): {shown_keys(gone)}"
    counts = f"{len(states) - len(todo)} done, {len(new)} missing, {len(todo) - len(new)} stale"
    if not todo:
        return StageStatus("done", [f"partitions: {counts}{left}"] if states or left else [])
    reasons = [f"partitions: {counts}{left}"]
    by_reason: dict[str, list[str]] = {}  # the partitions of each first reason: one line per reason
    for key in todo:
        by_reason.setdefault((states[key].reasons or ["?"])[0], []).append(key)
    reasons += [f"{shown_keys(keys)}: {why}" for why, keys in by_reason.items()]
    return StageStatus("missing", reasons[:MAX_REASONS], todo)


def deleted_partitions(stage: ResolvedStage) -> list[str]:
    """Partitions of a partitioned stage with a folder of checkpoints but no longer listed (their file
    was removed), naturally ordered."""
    folder = f"{stage.stage_dir}/{PARTITIONS_DIR}"
    if not storage.is_dir(folder):
        return []
    listed = set(stage.partitions) | set(stage.skipped)
    gone = [key for key in storage.list_names(folder) if key not in listed]
    held = [k for k in gone if any(e.kind == "committed" for e in checkpoint.stage_entries(f"{folder}/{k}"))]
    return order_keys(held)  # a folder gc emptied is no partition any more


def published_by_other_run(stage: ResolvedStage, published: str) -> str:
    """Why an export holding another fingerprint of this stage is published again: the params of the
    run that published it, where they differ from this run's (found through the committed manifests
    of both runs, upstream along the inputs)."""
    then = checkpoint.Checkpoint(stage.stage_dir, published).manifest()
    now = stage.checkpoint.manifest()
    where = f"{stage.publish_path} holds fingerprint {published}"
    if then is None:
        return f"published by another run ({where}; that run's checkpoint is gone)"
    published_with = then.get("run_params")
    if isinstance(published_with, Mapping) and stage.run_params:
        # the spec's params as the user set them (-p, the trigger form), where the runs differ
        differences = [
            f"{key}={_short(published_with[key])}"
            for key in sorted(published_with)
            if published_with[key] != stage.run_params.get(key, published_with[key])
        ]
    elif now is not None:  # a checkpoint from before run params were recorded: the rendered stage params
        differences = _param_differences(stage.name, then, now, set())
    else:
        differences = []
    if not differences:
        return f"published by another run ({where})"
    return f"published by another run (params: {', '.join(differences[:MAX_REASONS])}): {where}"


def _param_differences(name: str, then: Mapping[str, Any], now: Mapping[str, Any], seen: set[str]) -> list[str]:
    """``stage.param=value`` (the value ``then`` had) for every rendered param of this stage and its
    upstream stages that differs between two committed manifests of the same stage."""
    old, new = _flatten(then.get("params") or {}), _flatten(now.get("params") or {})
    found = [f"{name}.{key}={_short(old[key])}" for key in sorted(old) if old[key] != new.get(key, old[key])]
    now_inputs = now.get("inputs") or {}
    for role, was in sorted((then.get("inputs") or {}).items()):
        is_ = now_inputs.get(role) or {}
        if was.get("fingerprint") == is_.get("fingerprint") or was.get("stage") in seen:
            continue
        seen.add(str(was.get("stage")))
        upstream_then, upstream_now = _input_manifest(was), _input_manifest(is_)
        if upstream_then and upstream_now:
            found = _param_differences(str(was.get("stage")), upstream_then, upstream_now, seen) + found
    return found


def _input_manifest(recorded: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest of the upstream checkpoint an input record names (its path is <stage_dir>/<fp>/<output>)."""
    path, fingerprint = recorded.get("path"), recorded.get("fingerprint")
    if not isinstance(path, str) or not isinstance(fingerprint, str) or path.count("/") < 2:
        return None
    return checkpoint.Checkpoint(path.rsplit("/", 2)[0], fingerprint).manifest()


def reused_upstreams(stage: ResolvedStage) -> list[str]:
    """Inputs whose checkpoint was recomputed since this one was committed, with the same content."""
    recorded = (stage.checkpoint.manifest() or {}).get("inputs") or {}
    reasons = []
    for role, source in sorted(stage.inputs.items()):
        then = recorded.get(role) or {}
        recomputed = (
            then.get("fingerprint") != source.fingerprint or then.get("committed", source.committed) != source.committed
        )
        if source.content and recomputed:
            name = f"{source.spec}.{source.stage}" if source.spec else source.stage
            reasons.append(f"upstream recomputed, same content: reused ({name}, input {role})")
    return reasons


def latest_manifest(stage: ResolvedStage) -> dict[str, Any] | None:
    """The most recently committed manifest of another fingerprint of this stage, if any."""
    best: tuple[str, dict[str, Any]] | None = None
    for name in storage.list_names(stage.stage_dir):
        if name.startswith("_") or name == stage.fingerprint:
            continue
        manifest = checkpoint.Checkpoint(stage.stage_dir, name).manifest()
        if manifest is None:
            continue
        finished = str(manifest.get("finished", ""))
        if best is None or finished > best[0]:
            best = (finished, manifest)
    return best[1] if best else None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def key_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human reasons for every difference between two cache keys."""
    reasons: list[str] = []
    if old.get("kind") != new.get("kind"):
        reasons.append(f"code changed: kind {old.get('kind')} -> {new.get('kind')}")
    old_params, new_params = _flatten(old.get("params") or {}), _flatten(new.get("params") or {})
    for name in sorted(set(old_params) | set(new_params)):
        if old_params.get(name, "<unset>") != new_params.get(name, "<unset>"):
            reasons.append(
                f"params changed: {name} {_short(old_params.get(name, '<unset>'))} -> {_short(new_params.get(name, '<unset>'))}"
            )
    old_code, new_code = old.get("code") or {}, new.get("code") or {}
    for module in sorted(set(old_code) | set(new_code)):
        if old_code.get(module) != new_code.get(module):
            what = "added" if module not in old_code else "removed" if module not in new_code else "edited"
            reasons.append(f"code changed: {module} ({what})")
    old_libs, new_libs = old.get("libraries") or {}, new.get("libraries") or {}
    for dist in sorted(set(old_libs) | set(new_libs)):
        if old_libs.get(dist) != new_libs.get(dist):
            reasons.append(f"code changed: library {dist} {old_libs.get(dist)} -> {new_libs.get(dist)}")
    old_data, new_data = old.get("data") or {}, new.get("data") or {}
    for path in sorted(set(old_data) | set(new_data)):
        if path not in old_data:
            reasons.append(f"input data changed: {path} added")
        elif path not in new_data:
            reasons.append(f"input data changed: {path} removed")
        elif old_data[path] != new_data[path]:
            reasons.append(f"input data changed: {path} modified")
    old_up, new_up = old.get("upstream") or {}, new.get("upstream") or {}
    for role in sorted(set(old_up) | set(new_up)):
        if old_up.get(role) != new_up.get(role):
            stage = str(new_up.get(role) or old_up.get(role)).partition(".")[0].partition("@")[0]
            reasons.append(f"upstream changed: {stage} (input {role})")
    old_specs, new_specs = old.get("upstream_specs") or {}, new.get("upstream_specs") or {}
    for role in sorted(set(old_specs) | set(new_specs)):
        if old_specs.get(role) != new_specs.get(role):
            # "<dag_id>:<stage>.<output>#<content>" (a dag_id holds no ':')
            spec, _, rest = str(new_specs.get(role) or old_specs.get(role)).partition(":")
            reasons.append(f"upstream spec changed: {spec}.{rest.partition('.')[0]} (input {role})")
    old_conf, new_conf = old.get("conf") or {}, new.get("conf") or {}
    for conf_key in sorted(set(old_conf) | set(new_conf)):
        if old_conf.get(conf_key) != new_conf.get(conf_key):
            reasons.append(
                f"spark conf changed: {conf_key} {old_conf.get(conf_key, '<unset>')} -> {new_conf.get(conf_key, '<unset>')}"
            )
    return reasons
