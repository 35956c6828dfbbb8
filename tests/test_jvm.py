"""The JVM class archive: the options that carry it, and a real Spark JVM mapping its classes from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dagspec import jvm


def test_options_carry_the_archive_first_and_keep_the_callers_own(tmp_path: Path, monkeypatch) -> None:
    archive = tmp_path / "spark.jsa"
    monkeypatch.setattr(jvm, "archive_path", lambda: archive)
    assert jvm.java_options({"JDK_JAVA_OPTIONS": "-Xmx1g"}) == "-Xmx1g"  # no archive: nothing added
    assert jvm.jvm_env({}) == {}
    archive.write_bytes(b"x")
    options = jvm.java_options({"JDK_JAVA_OPTIONS": "-Xmx1g"})
    assert options.startswith(f"-XX:SharedArchiveFile={archive} -Xshare:auto") and options.endswith(" -Xmx1g")
    assert jvm.java_options({"JDK_JAVA_OPTIONS": options}) == options  # applied once, not twice
    assert jvm.jvm_env({}) == {"JDK_JAVA_OPTIONS": jvm.java_options({})}


def test_a_spark_jvm_maps_its_classes_from_the_archive_make_bootstrap_built(tmp_path: Path) -> None:
    archive = jvm.archive_path()
    assert archive.is_file(), f"{archive} is missing: `make bootstrap` builds it with `dagspec jvm-archive`"
    env = {k: v for k, v in os.environ.items() if k != jvm.JAVA_OPTIONS_VAR}
    # to a file: spark-class reads the launcher JVM's stdout as the command to run
    log = f"-Xlog:class+load=info:file={tmp_path}/classes-%p.log"
    env[jvm.JAVA_OPTIONS_VAR] = jvm.java_options({jvm.JAVA_OPTIONS_VAR: log})
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the SparkSubmit JVM (the launcher JVM before it loads a handful of classes from its own path);
    # lambdas are spun at run time, never archived
    biggest = max(tmp_path.glob("classes-*.log"), key=lambda f: f.stat().st_size).read_text().splitlines()
    loads = [line for line in biggest if "org.apache.spark" in line and "source:" in line and "$$Lambda" not in line]
    mapped = [line for line in loads if "shared objects file (top)" in line]
    assert len(loads) > 100 and mapped == loads, f"{len(mapped)} of {len(loads)} Spark classes came from {archive}"


def test_a_jvm_whose_class_path_does_not_match_runs_without_a_word() -> None:
    env = {**os.environ, jvm.JAVA_OPTIONS_VAR: jvm.java_options({})}
    done = subprocess.run(["java", "-cp", "/nonexistent", "-version"], env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert "warning" not in (done.stdout + done.stderr).lower()


def test_the_warm_up_job_runs_on_plain_pyspark_as_the_dockerfile_runs_it() -> None:
    """The image runs the module before dagspec is installed: it may import only the stdlib and pyspark."""
    import ast

    from dagspec.job import jvm_warmup

    imported = set()
    for node in ast.walk(ast.parse(Path(jvm_warmup.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "tempfile", "collections", "pathlib", "typing", "pyspark"}
    dockerfile = (Path(__file__).resolve().parents[1] / "Dockerfile").read_text()
    assert "COPY src/dagspec/job/jvm_warmup.py /opt/dagspec/src/dagspec/job/jvm_warmup.py" in dockerfile
