"""What a spec may not ask Spark to do: conf keys that start programs, load code or weaken security.

A spec is data: whoever may edit one may choose what a pipeline computes, not which programs run
(``docs/security.md``). ``spark.conf`` is passed to spark-submit as ``--conf`` pairs, and some keys
make Spark start a program (``spark.pyspark.python``), load code (``spark.jars``,
``*.extraClassPath``, plugin and listener classes), inject JVM options (``*.extraJavaOptions``),
set the executors' environment (``spark.executorEnv.*``), send the job elsewhere (``spark.master``,
Kubernetes pod templates and images) or switch off authentication, encryption and redaction.
Those keys are refused when the spec loads, unless the administrator allows them outside the
spec: ``DAGSPEC_ALLOWED_CONF``, a comma-separated list of key patterns (``fnmatch``, e.g.
``spark.jars.packages,spark.sql.extensions``) in the environment of the DAG processor and of
``dagspec``. Conf values are never rendered by any template engine: a value holding ``{{``,
``{%`` or ``{#`` is refused, so a secret cannot be templated into the spark-submit command line.

The SQL side of the same rule (script transforms, ``ADD JAR``, ``reflect``) is in the ``sql``
kind's params model, so it runs wherever its params are validated: when the spec loads and, after
rendering, in the job.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from typing import Any, TypeVar

ALLOWED_CONF_ENV = "DAGSPEC_ALLOWED_CONF"

_STARTS_PROGRAMS = "starts this program"
_LOADS_CODE = "puts code on the class path or ships it to the executors"
_JVM_OPTIONS = "injects JVM options (-javaagent, -XX:OnOutOfMemoryError=<command>, ...)"
_ENVIRONMENT = "sets environment variables of Spark's processes (PYSPARK_PYTHON, LD_PRELOAD, ...)"
_CLASSES = "loads classes into the driver and executors"
_SECURITY = "is the cluster's security setting, not a pipeline's"
_ELSEWHERE = "decides where and in what the job runs"

# (key pattern, why it is refused); patterns are fnmatch, compared case-insensitively
REFUSED_CONF: tuple[tuple[str, str], ...] = (
    ("spark.pyspark.python", _STARTS_PROGRAMS),
    ("spark.pyspark.driver.python", _STARTS_PROGRAMS),
    ("spark.python.worker.module", _STARTS_PROGRAMS),
    ("spark.python.daemon.module", _STARTS_PROGRAMS),
    ("spark.r.*", _STARTS_PROGRAMS),
    ("spark.sparkr.*", _STARTS_PROGRAMS),
    ("spark.*.resource.*.discoveryScript", _STARTS_PROGRAMS),
    ("*.extraJavaOptions", _JVM_OPTIONS),
    ("*.defaultJavaOptions", _JVM_OPTIONS),
    ("*.extraClassPath", _LOADS_CODE),
    ("*.extraLibraryPath", "loads native libraries"),
    ("spark.jars", _LOADS_CODE),
    ("spark.jars.*", _LOADS_CODE),
    ("spark.submit.*", _LOADS_CODE),
    ("spark.files", _LOADS_CODE),
    ("spark.archives", _LOADS_CODE),
    ("spark.yarn.dist.*", _LOADS_CODE),
    ("spark.yarn.jars", _LOADS_CODE),
    ("spark.yarn.archive", _LOADS_CODE),
    ("spark.executorEnv.*", _ENVIRONMENT),
    ("spark.yarn.appMasterEnv.*", _ENVIRONMENT),
    ("spark.kubernetes.driverEnv.*", _ENVIRONMENT),
    ("spark.mesos.driverEnv.*", _ENVIRONMENT),
    ("spark.plugins", _CLASSES),
    ("spark.plugins.*", _CLASSES),
    ("spark.extraListeners", _CLASSES),
    ("spark.sql.queryExecutionListeners", _CLASSES),
    ("spark.sql.streaming.streamingQueryListeners", _CLASSES),
    ("spark.sql.extensions", _CLASSES),
    ("spark.ui.filters", _CLASSES),
    ("spark.metrics.conf*", _CLASSES),
    ("spark.kubernetes.*podTemplateFile", _ELSEWHERE),
    ("spark.kubernetes.*container.image", _ELSEWHERE),
    ("spark.kubernetes.*.volumes.*", "mounts host paths or volumes into the pods"),
    ("spark.kubernetes.*.pod.featureSteps", _CLASSES),
    ("spark.kubernetes.authenticate.*", _SECURITY),
    ("spark.master", "comes from the Airflow connection (spark.conn_id), never from the spec"),
    ("spark.redaction.*", "decides what the logs and the UI hide (passwords, tokens)"),
    ("spark.sql.redaction.*", "decides what the logs and the UI hide (passwords, tokens)"),
    ("spark.authenticate*", _SECURITY),
    ("spark.*acls*", _SECURITY),
    ("spark.ssl.*", _SECURITY),
    ("spark.network.crypto.*", _SECURITY),
    ("spark.io.encryption.*", _SECURITY),
)
TEMPLATE_MARKERS = ("{{", "{%", "{#")

V = TypeVar("V")


def allowed_patterns() -> list[str]:
    """The administrator's allowed key patterns (``DAGSPEC_ALLOWED_CONF``)."""
    return [p.strip() for p in os.environ.get(ALLOWED_CONF_ENV, "").split(",") if p.strip()]


def refusal(key: str) -> str | None:
    """Why ``key`` may not be set by a spec, or None when it may."""
    lowered = key.lower()
    if any(fnmatch.fnmatchcase(lowered, p.lower()) for p in allowed_patterns()):
        return None
    for pattern, why in REFUSED_CONF:
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return why
    return None


def conf_problems(conf: Mapping[str, Any]) -> list[str]:
    """Every refused key and every templated value of a ``spark.conf`` mapping, one line each."""
    problems = []
    for key, value in conf.items():
        why = refusal(str(key))
        if why is not None:
            problems.append(
                f"{key!r} is refused: it {why}; an administrator can allow it with {ALLOWED_CONF_ENV} "
                "(docs/security.md)"
            )
        if isinstance(value, str) and any(marker in value for marker in TEMPLATE_MARKERS):
            problems.append(
                f"{key!r}: conf values are not templates ({value!r}); nothing renders them, and a secret "
                "belongs in an Airflow connection (docs/security.md)"
            )
    return problems


def check_conf(conf: dict[str, V]) -> dict[str, V]:
    """``conf`` unchanged, or a ValueError listing every problem (for a pydantic validator)."""
    problems = conf_problems(conf)
    if problems:
        raise ValueError("; ".join(problems))
    return conf
