"""Build the CDS archive of ``dagspec.jvm``: one warm-up spark-submit that dumps its classes at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dagspec import jvm
from dagspec.job import jvm_warmup


def build_archive(*, force: bool = False) -> str:
    """Write the archive (atomically: a killed build leaves no half file); returns what happened."""
    target = jvm.archive_path()
    if target.is_file() and not force:
        return f"JVM class archive: {target} (exists; --force rebuilds it)"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if k != jvm.JAVA_OPTIONS_VAR}  # dump from the JDK's own base
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    argv = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--driver-java-options",
        f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off",
        jvm_warmup.__file__,
    ]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        return (
            f"JVM class archive: not built (exit {done.returncode}); Spark JVMs start without it\n{done.stderr[-2000:]}"
        )
    os.replace(partial, target)
    size_mb = target.stat().st_size / 2**20
    return f"JVM class archive: {target} ({size_mb:.0f} MB) built in {time.monotonic() - started:.0f} s"
