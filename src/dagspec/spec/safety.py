"""Which Spark conf a spec may set: an allowlist of keys that tune results or resources.

A spec is data: whoever may edit one may choose what a pipeline computes, not which programs run
(``docs/security.md``). ``spark.conf`` reaches Spark twice: as spark-submit ``--conf`` pairs of a
stage's own driver, and, for ``spark.sql.*`` session settings, set on the stage's session of a
shared Spark Connect server. Many keys make Spark start a program, load a class or write
elsewhere, and Spark keeps adding them, so a spec may set only the keys listed here
(``ALLOWED_RESOURCE_CONF``, ``ALLOWED_RESULT_CONF``; compared case-sensitively, as Spark does).
``REFUSED_CONF`` says why the best-known dangerous keys are refused; any other key is refused as
"not on the allowlist". The administrator allows more keys outside the spec:
``DAGSPEC_ALLOWED_CONF``, a comma-separated list of key patterns (``fnmatch``, compared
case-insensitively, e.g. ``spark.jars.packages,spark.sql.extensions``) in the environment of the
DAG processor and of ``dagspec``. Conf values are never rendered by any template engine: a value
holding ``{{``, ``{%`` or ``{#`` is refused, so a secret cannot be templated into the spark-submit
command line. Conf that dagspec sets itself (its Connect server's) never passes through here.

The SQL side of the same rule (script transforms, ``ADD JAR``, ``reflect``) is in the ``sql``
kind's params model, so it runs wherever its params are validated: when the spec loads and, after
rendering, in the job.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
from typing import TypeVar

ALLOWED_CONF_ENV = "DAGSPEC_ALLOWED_CONF"

# Keys that size, place or observe a run without changing what it computes. They stay out of the
# cache key: each is in dagspec.plan.fingerprint.RESOURCE_ONLY_CONF (a test checks it).
ALLOWED_RESOURCE_CONF: tuple[tuple[str, str], ...] = (
    ("spark.driver.memory", "the driver's heap (also spark.resources.driver_memory)"),
    ("spark.driver.memoryOverhead", "the driver container's memory beyond its heap"),
    ("spark.driver.memoryOverheadFactor", "the same, as a fraction of the heap"),
    ("spark.driver.cores", "the driver's cores (cluster deploy mode)"),
    ("spark.driver.maxResultSize", "the cap on results collected to the driver"),
    ("spark.executor.memory", "each executor's heap (also spark.resources.executor_memory)"),
    ("spark.executor.memoryOverhead", "each executor container's memory beyond its heap"),
    ("spark.executor.memoryOverheadFactor", "the same, as a fraction of the heap"),
    ("spark.executor.pyspark.memory", "the memory limit of each executor's Python workers"),
    ("spark.executor.cores", "each executor's cores (also spark.resources.executor_cores)"),
    ("spark.executor.instances", "how many executors (also spark.resources.num_executors)"),
    ("spark.executor.heartbeatInterval", "how often executors report to the driver"),
    ("spark.cores.max", "the cap on the job's cores on a standalone cluster"),
    ("spark.python.worker.memory", "the memory a Python worker aggregates in before it spills"),
    ("spark.memory.fraction", "the share of the heap for execution and storage"),
    ("spark.memory.storageFraction", "the part of it kept for cached data"),
    ("spark.memory.offHeap.enabled", "off-heap memory for execution and storage"),
    ("spark.memory.offHeap.size", "its size"),
    ("spark.dynamicAllocation.*", "dynamic allocation: on or off, executor bounds and idle timeouts"),
    ("spark.network.timeout", "the default network timeout"),
    ("spark.sql.broadcastTimeout", "how long a broadcast join waits for its table"),
    ("spark.task.maxFailures", "task retries before the stage fails"),
    ("spark.speculation", "re-launch slow tasks"),
    ("spark.locality.wait", "how long a task waits for a data-local slot"),
    ("spark.scheduler.mode", "FIFO or FAIR scheduling of the job's own jobs"),
    ("spark.ui.enabled", "the driver's web UI"),
    ("spark.ui.showConsoleProgress", "the progress bar in the task log"),
    ("spark.eventLog.enabled", "event logs for the history server (in the administrator's spark.eventLog.dir)"),
    ("spark.eventLog.compress", "their compression"),
    ("spark.eventLog.rolling.enabled", "their rolling"),
)

# Keys that can change what a stage computes or the bytes it writes: in the cache key.
ALLOWED_RESULT_CONF: tuple[tuple[str, str], ...] = (
    ("spark.sql.shuffle.partitions", "partitions after a shuffle: output files and order"),
    ("spark.default.parallelism", "partitions of RDD operations (the training kinds)"),
    ("spark.task.cpus", "cores per task: task slots, and the training kinds' threads"),
    ("spark.sql.adaptive.enabled", "adaptive query execution: re-plans shuffles and joins"),
    ("spark.sql.adaptive.coalescePartitions.enabled", "merges small shuffle partitions"),
    ("spark.sql.adaptive.advisoryPartitionSizeInBytes", "the partition size it aims for"),
    ("spark.sql.adaptive.skewJoin.enabled", "splits skewed join partitions"),
    ("spark.sql.autoBroadcastJoinThreshold", "the largest table a join broadcasts"),
    ("spark.sql.adaptive.autoBroadcastJoinThreshold", "the same, when re-planning"),
    ("spark.sql.files.maxPartitionBytes", "the bytes of input per read partition"),
    ("spark.sql.files.openCostInBytes", "the cost of opening a file, when packing partitions"),
    ("spark.sql.files.maxRecordsPerFile", "the rows per written file"),
    ("spark.files.maxPartitionBytes", "the bytes per partition of whole-file reads (binaryFiles)"),
    ("spark.sql.parquet.compression.codec", "the codec of written Parquet (a fixed list of names)"),
    ("spark.sql.orc.compression.codec", "the codec of written ORC (a fixed list of names)"),
    ("spark.sql.avro.compression.codec", "the codec of written Avro (a fixed list of names)"),
    ("spark.sql.session.timeZone", "the time zone of timestamps"),
    ("spark.sql.ansi.enabled", "ANSI SQL: errors instead of nulls on bad casts and overflows"),
    ("spark.sql.legacy.timeParserPolicy", "how dates and timestamps are parsed from text"),
    ("spark.sql.execution.arrow.pyspark.enabled", "Arrow between the JVM and pandas"),
    ("spark.sql.execution.arrow.pyspark.fallback.enabled", "falling back when Arrow cannot"),
    ("spark.sql.execution.arrow.maxRecordsPerBatch", "the rows per Arrow batch given to Python"),
)

_STARTS_PROGRAMS = "starts this program"
_LOADS_CODE = "puts code on the class path or ships it to the executors"
_JVM_OPTIONS = "injects JVM options (-javaagent, -XX:OnOutOfMemoryError=<command>, ...)"
_ENVIRONMENT = "sets environment variables of Spark's processes (PYSPARK_PYTHON, LD_PRELOAD, ...)"
_CLASSES = "loads classes into the driver and executors"
_SECURITY = "is the cluster's security setting, not a pipeline's"
_ELSEWHERE = "decides where and in what the job runs"
_PATHS = "writes files under a path of its own, outside the deployment's roots"
_PARSING = (
    'changes how Spark parses SQL text (a double-quoted "reflect" becomes a name), which the sql kind\'s '
    "checks read as written"
)

# Why the best-known dangerous keys are refused: (key pattern, reason); fnmatch, case-insensitive.
REFUSED_CONF: tuple[tuple[str, str], ...] = (
    ("spark.pyspark.python", _STARTS_PROGRAMS),
    ("spark.pyspark.driver.python", _STARTS_PROGRAMS),
    ("spark.sql.execution.pyspark.python", _STARTS_PROGRAMS),
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
    ("spark.sql.hive.metastore.jars*", _LOADS_CODE),
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
    ("spark.sql.catalog.*", _CLASSES),
    ("spark.serializer", _CLASSES),
    ("spark.kryo.*", _CLASSES),
    ("spark.shuffle.manager", _CLASSES),
    ("spark.io.compression.codec", _CLASSES),
    ("*class", _CLASSES),
    ("*classes", _CLASSES),
    ("spark.ui.filters", _CLASSES),
    ("spark.metrics.conf*", _CLASSES),
    ("spark.hadoop.*", "sets Hadoop's configuration: file system classes (fs.*.impl), credential providers"),
    ("spark.sql.ansi.doubleQuotedIdentifiers", _PARSING),
    ("spark.sql.parser.*", _PARSING),
    ("spark.eventLog.dir", _PATHS),
    ("spark.local.dir", _PATHS),
    ("spark.checkpoint.dir", _PATHS),
    ("spark.sql.warehouse.dir", _PATHS),
    ("spark.sql.streaming.checkpointLocation", _PATHS),
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
_ALLOWED = ALLOWED_RESOURCE_CONF + ALLOWED_RESULT_CONF
_HATCH = f"an administrator can allow it with {ALLOWED_CONF_ENV}, outside the spec (docs/security.md)"

V = TypeVar("V")


def allowed_patterns() -> list[str]:
    """The administrator's allowed key patterns (``DAGSPEC_ALLOWED_CONF``)."""
    return [p.strip() for p in os.environ.get(ALLOWED_CONF_ENV, "").split(",") if p.strip()]


def is_on_allowlist(key: str) -> bool:
    """May every spec set ``key`` (case-sensitive, as Spark reads keys)?"""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern, _ in _ALLOWED)


def refusal(key: str) -> str | None:
    """Why a spec may not set ``key`` (one sentence), or None when it may."""
    lowered = key.lower()
    if any(fnmatch.fnmatchcase(lowered, p.lower()) for p in allowed_patterns()):
        return None
    for pattern, why in REFUSED_CONF:
        if fnmatch.fnmatchcase(lowered, pattern.lower()):
            return f"{key!r} is refused: it {why}; {_HATCH}"
    if is_on_allowlist(key):
        return None
    exact = [p for p, _ in _ALLOWED if "*" not in p]
    same = [p for p in exact if p.lower() == lowered]
    # keys share long prefixes: only a near miss (a typo) is worth a hint
    close = difflib.get_close_matches(key, exact, n=1, cutoff=0.9)
    hint = f" (keys are case-sensitive: did you mean {same[0]!r}?)" if same else ""
    hint = hint or (f" (did you mean {close[0]!r}?)" if close else "")
    return f"{key!r} is not on the allowlist of Spark conf a spec may set{hint}; {_HATCH}"


def check_conf_key(key: str) -> str:
    """``key`` unchanged, or a ValueError saying why a spec may not set it (a pydantic validator)."""
    why = refusal(key)
    if why is not None:
        raise ValueError(why)
    return key


def check_conf_value(value: V) -> V:
    """``value`` unchanged, or a ValueError when it looks like a template (a pydantic validator)."""
    if isinstance(value, str) and any(marker in value for marker in TEMPLATE_MARKERS):
        raise ValueError(
            f"conf values are not templates ({value!r}); nothing renders them, and a secret belongs in an "
            "Airflow connection (docs/security.md)"
        )
    return value
