"""``dagspec gc``: remove checkpoints no current spec reaches, and leftovers of dead attempts.

Reachable = the fingerprints every spec of the pipelines folder resolves to with its params'
defaults, and every committed one of a stage whose fingerprint is provisional (an upstream of it is
not committed, and its key will hold that upstream's content). Per stage (and per partition of a partitioned stage), unreachable committed
checkpoints beyond the ``--keep`` newest are removed, with temporaries and scratch folders of
attempts that no live lease holds, checkpoints replaced by ``--force`` and stale leases. Nothing under
a live lease is touched; exports and run records (``.runs``) are not touched.
The checkpoint a stage's ``_LATEST`` names is kept: other specs read it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from dagspec import checkpoint, storage
from dagspec.errors import DagspecError, SpecError
from dagspec.local.project import absolute_root, display, load, spec_paths
from dagspec.plan.history import RUNS_DIR
from dagspec.plan.resolve import default_context, resolve_pipeline, resolve_storage_root
from dagspec.plan.resolved import PARTITIONS_DIR
from dagspec.spec.models import PipelineSpec
from dagspec.storage import project_home


@dataclass(frozen=True)
class Removal:
    """One path gc removes, why, and its size."""

    path: str
    why: str
    size: int


def reachable(specs: list[PipelineSpec], storage_root: str | None, home: Path) -> tuple[dict[str, set[str]], set[str]]:
    """(stage dir -> fingerprints the specs reach at their defaults, dag_ids that could not be resolved)."""
    found: dict[str, set[str]] = {}
    unresolved: set[str] = set()
    for spec in specs:
        try:
            plan = resolve_pipeline(spec, default_context(spec), home=home, storage_root=storage_root)
        except DagspecError:
            unresolved.add(spec.dag_id)  # its params need a run's context: keep all of it
            continue
        stages = [s for stage in plan.values() for s in (stage.partitions.values() if stage.partitioned else [stage])]
        for stage in stages:
            if stage.pending:  # its fingerprint waits for its upstream's content: keep what it has
                found.setdefault(stage.stage_dir, set()).update(
                    e.fingerprint for e in checkpoint.stage_entries(stage.stage_dir) if e.kind == "committed"
                )
            found.setdefault(stage.stage_dir, set()).add(stage.fingerprint)
    return found, unresolved


def plan_removals(
    root: str, reached: dict[str, set[str]], unresolved: set[str], keep: int, only: set[str] | None = None
) -> list[Removal]:
    """What gc would remove under ``root`` (only under the dag_ids in ``only``, when given)."""
    removals: list[Removal] = []
    for dag_id in storage.list_names(root):
        if dag_id == checkpoint.EXPORTS_DIR or dag_id in unresolved or not storage.is_dir(f"{root}/{dag_id}"):
            continue
        if only is not None and dag_id not in only:
            continue
        for stage in storage.list_names(f"{root}/{dag_id}"):
            if stage == RUNS_DIR:  # the runs' records (the UI's history of each run): kept
                continue
            stage_dir = f"{root}/{dag_id}/{stage}"
            removals += _stage_removals(stage_dir, reached.get(stage_dir, set()), keep)
            partitions = f"{stage_dir}/{PARTITIONS_DIR}"  # a partitioned stage: each partition's own folder
            for key in storage.list_names(partitions) if storage.is_dir(partitions) else []:
                folder = f"{partitions}/{key}"
                removals += _stage_removals(folder, reached.get(folder, set()), keep, latest_kept=False)
    return removals


def _stage_removals(stage_dir: str, wanted: set[str], keep: int, *, latest_kept: bool = True) -> list[Removal]:
    entries = checkpoint.stage_entries(stage_dir)
    live = {e.fingerprint for e in entries if e.kind == "lease" and checkpoint.lease_is_live(stage_dir, e.fingerprint)}
    committed = {e.fingerprint for e in entries if e.kind == "committed"}
    others = sorted(
        (e for e in entries if e.kind == "committed" and e.fingerprint not in wanted),
        key=lambda e: e.finished,
        reverse=True,
    )
    # what other specs' stages read of this one (a partition's is read by no other spec)
    latest = checkpoint.latest(stage_dir) if latest_kept else None
    kept = wanted | {e.fingerprint for e in others[:keep]} | ({latest.fingerprint} if latest else set())
    removals = []
    for entry in entries:
        if entry.fingerprint in live:
            continue
        why = {
            "committed": "not reached by any spec" if entry.fingerprint not in kept else "",
            "broken": "an incomplete checkpoint",
            "attempt": "the temporary folder of a dead attempt",
            "replaced": "a checkpoint replaced by --force",
            "lease": "a stale lease",
            "scratch": "the scratch folder of a committed checkpoint"
            if entry.fingerprint in committed
            else ""
            if entry.fingerprint in kept
            else "the scratch folder of an unreached fingerprint",
            "failure": "the failure record of a fingerprint since committed"
            if entry.fingerprint in committed
            else ""
            if entry.fingerprint in kept
            else "the failure record of an unreached fingerprint",
        }[entry.kind]
        if why:
            path = f"{stage_dir}/{entry.name}"
            removals.append(Removal(path, why, storage.size_of(path)))
    return removals


def cmd_gc(args: argparse.Namespace) -> int:
    """Print and (unless --dry-run) remove what no current spec needs; report the bytes freed."""
    home = project_home()
    specs: list[PipelineSpec] = []
    invalid = False
    for path in spec_paths([], home):
        try:
            specs.append(load(path, home))
        except SpecError:
            invalid = True
            print(f"skipping {display(path, home)}: invalid (its checkpoints are kept)")
    # an invalid spec's dag_id is unknown: collect only under the valid specs' own folders
    only = {spec.dag_id for spec in specs} if invalid else None
    if not specs:
        print("no valid specs: nothing is reachable, refusing to collect")
        return 1
    override = absolute_root(args.storage_root)
    roots = sorted({resolve_storage_root(spec, home, override) for spec in specs})
    total = 0
    for root in roots:
        reached, unresolved = reachable(
            [s for s in specs if resolve_storage_root(s, home, override) == root], override, home
        )
        for removal in plan_removals(root, reached, unresolved, args.keep, only):
            print(
                f"{'would remove' if args.dry_run else 'removing'} {removal.path} ({removal.size} bytes): {removal.why}"
            )
            if not args.dry_run:
                storage.delete(removal.path)
            total += removal.size
    verb = "would free" if args.dry_run else "freed"
    print(f"{verb} {total} bytes ({total / 2**20:.1f} MiB)")
    return 0
