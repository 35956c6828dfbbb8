"""Build the CDS archive of ``dagspec.jvm``: one warm-up spark-submit that dumps its classes at exit."""

from __future__ import annotations

import os
import subprocess
import time

from dagspec import jvm
from dagspec.job import jvm_warmup
from dagspec.job.connect_server import spark_env, spark_home


def build_archive(*, force: bool = False) -> str:
    """Write the archive (atomically: a killed build leaves no half file); returns what happened."""
    target = jvm.archive_path()
    if target.is_file() and not force:
        return f"JVM class archive: {target} (exists; --force rebuilds it)"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    env = spark_env(target.parent)
    env.pop(jvm.JAVA_OPTIONS_VAR, None)  # dump on the JDK's own base archive, not on an older one of ours
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
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
