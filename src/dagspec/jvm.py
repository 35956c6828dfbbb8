"""Faster Spark JVM starts: a class-data-sharing (CDS) archive of the classes a Spark JVM loads.

A spark-submit, the Connect server and a local cluster's daemons and executors each start a JVM
that loads thousands of classes from Spark's jars before doing any work; from a dynamic CDS
archive (JDK 13+) they are mapped instead. Measured on the 2-core machine, a one-job spark-submit:
15.4 s wall / 25.7 s CPU without, 9.8 s / 15.6 s with the archive (bench/jvm_start.py, bench/RESULTS.md).

The archive is built once per install (``dagspec jvm-archive``, run by ``make bootstrap``) into the
environment's ``share/dagspec`` folder, keyed by the pyspark version. JVMs started by dagspec get it
through ``JDK_JAVA_OPTIONS``; without the file nothing changes. A JVM whose class path or JDK does
not match the archive ignores it (``-Xshare:auto``), so a stale archive costs nothing but its speed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

JAVA_OPTIONS_VAR = "JDK_JAVA_OPTIONS"
# a mismatched archive is ignored silently: its warnings would land in every task log
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"


def archive_path() -> Path:
    """Where this environment's archive lives (it may not exist)."""
    try:
        spark = version("pyspark")
    except PackageNotFoundError:
        spark = "unknown"
    return Path(sys.prefix) / "share" / "dagspec" / f"spark-{spark}.jsa"


def java_options(environ: Mapping[str, str] | None = None) -> str:
    """``JDK_JAVA_OPTIONS`` for a Spark JVM: the archive's flags first, then the caller's own."""
    environ = os.environ if environ is None else environ
    own = environ.get(JAVA_OPTIONS_VAR, "").strip()
    archive = archive_path()
    if not archive.is_file() or "SharedArchiveFile" in own:
        return own
    return f"-XX:SharedArchiveFile={archive} {QUIET} {own}".strip()


def jvm_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment entry that gives a JVM started with ``environ`` the archive (empty if none)."""
    options = java_options(environ)
    return {JAVA_OPTIONS_VAR: options} if options else {}
