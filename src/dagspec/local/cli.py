"""The ``dagspec`` command: validate, list, show, run, head, describe, init, generate, cluster, airflow, history, connect, jvm-archive.

Heavy modules (Airflow, Spark) are imported only by the verbs that need them, so ``validate`` and
``show`` answer in well under a second.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dagspec.errors import DagspecError, SpecError
from dagspec.job import connect_server
from dagspec.job.connect_auth import token_path
from dagspec.kinds.catalog import load_catalog
from dagspec.local import airflow_server, cluster, history
from dagspec.local.gc import cmd_gc
from dagspec.local.generate import GENERATORS
from dagspec.local.inspect import cmd_describe, cmd_head
from dagspec.local.project import load_together, spec_paths
from dagspec.local.run import cmd_backfill, cmd_init, cmd_run, cmd_show
from dagspec.storage import project_home


def cmd_validate(args: argparse.Namespace) -> int:
    """Check specs as Airflow reads them: each alone, and their dag_ids against their folders'."""
    home = project_home()
    failed = 0
    paths = spec_paths(args.paths, home)
    if not paths:
        print("no spec files found", file=sys.stderr)
        return 1
    for loaded in load_together(paths, home, with_folders=True):
        if loaded.spec is None:
            failed += 1
            print(loaded.error, file=sys.stderr)
            continue
        print(f"ok  {loaded.file}: dag {loaded.spec.dag_id!r}, {len(loaded.spec.stages)} stages")
    return 1 if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    """The project's specs, then every stage kind with where it comes from."""
    home = project_home()
    print("pipelines:")
    for loaded in load_together(spec_paths([], home), home):
        if loaded.spec is not None:
            print(f"  {loaded.spec.dag_id:30} {len(loaded.spec.stages):3} stages  {loaded.file}")
        else:
            errors = len(loaded.error.issues) if loaded.error else 0
            print(f"  {'(invalid)':30} {errors:3} errors  {loaded.file}")
    catalog = load_catalog(home)
    print("kinds:")
    for definition in catalog.all():
        print(f"  {definition.name:24} {catalog.origins[definition.name]:28} {definition.description}")
    for error in catalog.errors:
        print(f"  (failed) {error}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """The spec's JSON Schema (every kind of the project), for editors."""
    from dagspec.spec.schema import schema_text

    sys.stdout.write(schema_text(load_catalog(project_home())))
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    """Start, stop or check the local cluster, Airflow or the Spark History Server (``up`` on ``--port``)."""
    module = {"cluster": cluster, "airflow": airflow_server, "history": history}[args.service]
    options = {"port": args.port} if args.service != "cluster" and args.action == "up" else {}
    result = getattr(module, f"{args.service}_{args.action}")(**options)
    if result is not None:
        print(result)
    return 0


def cmd_connect(args: argparse.Namespace) -> int:
    """Start, stop or check the local Spark Connect server."""
    home = project_home()
    if args.action == "up":
        print(f"Spark Connect server answering at {connect_server.ensure_server(home)}")
        port = connect_server.ServerSettings.from_env().port
        print(f"  clients need its token: sc://localhost:{port}/;token=<the content of {token_path(home)}>")
    elif args.action == "down":
        print(connect_server.stop_server(home))
    else:
        print(connect_server.server_status(home))
    return 0


def cmd_jvm_archive(args: argparse.Namespace) -> int:
    """Build the JVM class archive (dagspec.jvm); Spark works without it, only slower to start."""
    from dagspec.job.jvm_archive import build_archive

    print(build_archive(force=args.force))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dagspec", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    p = verbs.add_parser("validate", help="check spec files (default: every spec in pipelines/)")
    p.add_argument("paths", nargs="*")
    p.set_defaults(func=cmd_validate)

    p = verbs.add_parser("list", help="list the specs of the pipelines folder")
    p.set_defaults(func=cmd_list)

    p = verbs.add_parser("schema", help="print the spec's JSON Schema (draft 2020-12) for editors")
    p.set_defaults(func=cmd_schema)

    p = verbs.add_parser("show", help="stages, fingerprints and checkpoint state of a spec")
    p.add_argument("spec")
    p.add_argument("--json", action="store_true")
    p.add_argument("--storage-root")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    p.set_defaults(func=cmd_show)

    _add_run_verbs(verbs)
    _add_inspect_verbs(verbs)
    p = verbs.add_parser("init", help="create the local Airflow home and .dagspec/env")
    p.add_argument("--conn-id", action="append")
    p.set_defaults(func=cmd_init)

    p = verbs.add_parser("generate", help="write synthetic data")
    generators = p.add_subparsers(dest="name", required=True)
    for name, (add_arguments, generate) in GENERATORS.items():
        g = generators.add_parser(name, help=(generate.__doc__ or "").strip().splitlines()[0])
        add_arguments(g)
        g.set_defaults(func=generate)

    p = verbs.add_parser("gc", help="remove checkpoints no current spec reaches and dead attempts' leftovers")
    p.add_argument("--keep", type=int, default=1, help="unreached checkpoints kept per stage, newest first (default 1)")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    p.add_argument("--storage-root")
    p.set_defaults(func=cmd_gc)

    _add_service_verbs(verbs)
    return parser


def _add_run_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``run`` and ``backfill``."""
    p = verbs.add_parser("run", help="run a spec locally through `airflow dags test`")
    p.add_argument("spec")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--storage-root")
    p.add_argument("--force", action="store_true", help="recompute every stage")
    p.add_argument("-v", "--verbose", action="store_true", help="stream Airflow's output")
    p.add_argument(
        "--mode",
        choices=["connect", "spark"],
        help="execution mode of the connection dagspec creates when none exists (default connect, or $DAGSPEC_MODE)",
    )
    p.set_defaults(func=cmd_run)

    p = verbs.add_parser(
        "backfill", help="compute the missing or stale partitions of a range (partitioned stages only)"
    )
    p.add_argument("spec")
    p.add_argument("--from", dest="from_", metavar="KEY", help="first partition key (default: the first)")
    p.add_argument("--to", metavar="KEY", help="last partition key (default: the last)")
    p.add_argument(
        "--parallel", type=int, metavar="N", help="partitions a stage computes at once (default: the spec's)"
    )
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--storage-root")
    p.add_argument("--force", action="store_true", help="recompute the range's partitions")
    p.add_argument("-v", "--verbose", action="store_true", help="stream Airflow's output")
    p.add_argument("--mode", choices=["connect", "spark"], help="as for run")
    p.set_defaults(func=cmd_backfill)


def _add_inspect_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``head`` and ``describe``: a committed output, without Spark."""
    for verb, func, help_ in (
        ("head", cmd_head, "schema and first rows of a committed stage output (pyarrow, no Spark)"),
        ("describe", cmd_describe, "row count, columns, null counts and metrics of a committed stage output"),
    ):
        p = verbs.add_parser(verb, help=help_)
        p.add_argument("spec")
        p.add_argument("target", metavar="STAGE[.output]")
        if verb == "head":
            p.add_argument("-n", type=int, default=10, help="rows to print (default 10)")
        p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
        p.add_argument("--storage-root")
        p.set_defaults(func=func)


def _add_service_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The local services: ``cluster``, ``airflow``, ``history``, ``connect``, and the JVM archive."""
    ports = {
        "airflow": (airflow_server.DEFAULT_PORT, "the UI and API"),
        "history": (history.DEFAULT_PORT, "the Spark History Server (token-protected)"),
    }
    for service in ("cluster", "airflow", "history"):
        what = "Spark History Server on the event logs" if service == "history" else service
        p = verbs.add_parser(service, help=f"start or stop the local {what} (background processes)")
        p.add_argument("action", choices=["up", "down", "status"])
        if service in ports:
            default, of = ports[service]
            p.add_argument(
                "--port", type=int, default=default, help=f"port of {of} on 127.0.0.1, for `up` (default {default})"
            )
        p.set_defaults(func=cmd_service, service=service)

    p = verbs.add_parser(
        "connect", help="start, stop or check the local Spark Connect server (127.0.0.1, token-protected)"
    )
    p.add_argument("action", choices=["up", "down", "status"])
    p.set_defaults(func=cmd_connect)

    p = verbs.add_parser("jvm-archive", help="build the class archive that makes Spark JVMs start faster (once)")
    p.add_argument("--force", action="store_true", help="rebuild it even if it exists")
    p.set_defaults(func=cmd_jvm_archive)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dagspec`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head`
        return 0
    except KeyboardInterrupt:  # Ctrl-C: the stages' processes were stopped on the way out
        print("interrupted", file=sys.stderr)
        return 130
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    except DagspecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
