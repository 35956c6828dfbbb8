"""``dagspec generate physics|criteo``: synthetic data written outside any pipeline.

The generators themselves are the kinds' (``dagspec.kinds.physics.generator``,
``dagspec.kinds.ctr.logs_generator``); this module only parses options, starts a local Spark
session and replaces the output folder atomically, so ``--out`` is either the previous data or
the complete new data, never half written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dagspec import checkpoint, storage
from dagspec.job.session import create_session


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=42, help="same seed: same data")
    parser.add_argument("--out", required=True, help="output directory (replaced atomically)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")


def add_physics_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``dagspec generate physics``."""
    parser.add_argument("--events", type=int, required=True, help="number of events")
    parser.add_argument("--partitions", type=int, default=None, help="Spark partitions (default: the cores)")
    parser.add_argument("--max-particles", type=int, default=801, help="cap on particles per event (default 801)")
    parser.add_argument("--multiplicity", type=float, default=1.0, help="scales the mean particle counts")
    _common(parser)


def generate_physics(args: argparse.Namespace) -> int:
    """Synthetic topology-classifier events (event_id, hfeatures, lfeatures, label) as Parquet."""
    from pydantic import ValidationError

    from dagspec.kinds.physics.generate_events import GeneratePhysicsEventsParams, generate_physics_dataframe
    from dagspec.kinds.physics.generator import GeneratorConfig
    from dagspec.kinds.physics.names import CLASS_NAMES

    try:
        params = GeneratePhysicsEventsParams(
            events=args.events,
            seed=args.seed,
            partitions=args.partitions,
            max_particles=args.max_particles,
            multiplicity=args.multiplicity,
        )
    except ValidationError as exc:
        print(f"error: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
        return 2
    if storage.is_uri(args.out):
        print("error: --out must be a local directory")
        return 2
    out = str(Path(args.out).resolve())
    staged = checkpoint.staging_path(out)
    config = GeneratorConfig(
        seed=params.seed,
        max_particles=params.max_particles,
        multiplicity=params.multiplicity,
        class_fractions=params.class_fractions,
    )
    spark = create_session("dagspec-generate-physics", master=args.master)
    try:
        generate_physics_dataframe(spark, params.events, config, params.partitions).write.parquet(staged)
        counts = {r["label"]: r["count"] for r in spark.read.parquet(staged).groupBy("label").count().collect()}
    except BaseException:  # re-raised: whatever stops the write (a Ctrl-C too) leaves no staged folder
        storage.delete(staged)
        raise
    finally:
        spark.stop()
    checkpoint.replace_folder(staged, out)
    summary = ", ".join(f"{name} {counts.get(k, 0)}" for k, name in enumerate(CLASS_NAMES))
    print(f"wrote {params.events} events to {out} ({summary})")
    return 0


def add_criteo_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``dagspec generate criteo``."""
    parser.add_argument("--rows", type=int, required=True, help="total rows over all days")
    parser.add_argument("--days", type=int, default=1, help="day files (day_00.tsv, ...)")
    from dagspec.kinds.ctr.logs_generator import BASE_CTR

    parser.add_argument("--base-ctr", type=float, default=BASE_CTR, help=f"click rate (default {BASE_CTR})")
    parser.add_argument("--partitions-per-day", type=int, default=2)
    parser.add_argument("--compress", action="store_true", help="write day_NN.tsv.gz")
    _common(parser)


def generate_criteo(args: argparse.Namespace) -> int:
    """Synthetic Criteo click logs, one day_NN.tsv file per day, in the exact raw format."""
    from dagspec.kinds.ctr.logs_generator import write_criteo_logs

    if args.rows < 0 or args.days < 1 or not 0 < args.base_ctr < 1:
        print("error: need --rows >= 0, --days >= 1 and 0 < --base-ctr < 1")
        return 2
    out = args.out if storage.is_uri(args.out) else str(Path(args.out).resolve())
    spark = create_session("dagspec-generate-criteo", master=args.master)
    try:
        stats = write_criteo_logs(
            spark, out, args.rows, args.days, args.seed, args.base_ctr, args.partitions_per_day, args.compress
        )
    finally:
        spark.stop()
    print(f"wrote {args.rows} rows in {args.days} day files to {out} (click rate {stats['ctr']:.4f})")
    return 0


GENERATORS = {
    "physics": (add_physics_arguments, generate_physics),
    "criteo": (add_criteo_arguments, generate_criteo),
}
