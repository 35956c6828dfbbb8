# One image for every node of docker-compose.yml: the Airflow components (api-server, scheduler,
# dag-processor, triggerer) and the Spark master and workers. Driver and executors must run the
# same Python and the same pyspark (4.2.x, with the jars that pyspark ships), so they share it.
#
# Build inputs (docs/deployment.md, "Without a registry, behind a proxy"):
#   --build-arg BASE_IMAGE=...   another Debian 12 image with Python 3.11 at /usr/local/bin/python
#                                (deploy/ci/base-images.sh makes one from Debian packages)
#   --secret id=extra_ca,src=... a PEM file of extra CA certificates for pip, e.g. an intercepting
#                                proxy's CA. BuildKit mounts it only while pip runs: it is in no layer.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# Java for Spark (the JVM behind pyspark, master and workers); procps for Spark's scripts (ps).
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/default-java \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# The pinned lock first, so code changes do not reinstall it. The Postgres drivers are the
# image's own addition: the local setup runs on SQLite and does not need them.
# With the extra_ca secret, pip trusts the system's CAs plus it (PIP_CERT, a file gone after the RUN).
COPY requirements.txt /opt/dagspec/requirements.txt
RUN --mount=type=secret,id=extra_ca \
    if [ -s /run/secrets/extra_ca ]; then \
        cat /etc/ssl/certs/ca-certificates.crt /run/secrets/extra_ca >/tmp/ca.pem && export PIP_CERT=/tmp/ca.pem; \
    fi \
    && python -m venv /opt/venv \
    && pip install --no-cache-dir -r /opt/dagspec/requirements.txt \
        -c /opt/dagspec/requirements.txt "psycopg2-binary==2.9.13" "asyncpg==0.32.0" \
    && pip check \
    && rm -f /tmp/ca.pem
# pyspark installs from an sdist without .pyc files, and PYTHONDONTWRITEBYTECODE keeps every process
# from caching them: each task, Connect client and Python worker compiled its 505 modules again.
RUN python -m compileall -q -j 0 /opt/venv/lib/python3.11/site-packages >/dev/null

# The class archive of docs/deployment.md ("Faster JVM starts"): a Spark JVM maps Spark's classes
# from it instead of loading them (a one-job spark-submit: 15.6 s of CPU instead of 25.7). One
# warm-up spark-submit records them, before the project's code is copied (a code change keeps this
# layer); JDK_JAVA_OPTIONS below gives it to every JVM of the stack: master, workers, their
# executors, the Connect server, own drivers. The warm-up is the package's own job (what `dagspec
# jvm-archive` runs), copied alone to where `COPY src` puts it later: it imports only pyspark.
COPY src/dagspec/job/jvm_warmup.py /opt/dagspec/src/dagspec/job/jvm_warmup.py
RUN mkdir -p /opt/venv/share/dagspec \
    && spark-submit --master "local[2]" --conf spark.ui.enabled=false \
        --driver-java-options "-XX:ArchiveClassesAtExit=/opt/venv/share/dagspec/spark.jsa -Xlog:cds=off -Xlog:cds+dynamic=off" \
        /opt/dagspec/src/dagspec/job/jvm_warmup.py >/tmp/warmup.log 2>&1 \
    || { tail -30 /tmp/warmup.log; exit 1; }; \
    test -s /opt/venv/share/dagspec/spark.jsa && rm -f /tmp/warmup.log

COPY pyproject.toml README.md* /opt/dagspec/
COPY src /opt/dagspec/src
RUN --mount=type=secret,id=extra_ca \
    if [ -s /run/secrets/extra_ca ]; then \
        cat /etc/ssl/certs/ca-certificates.crt /run/secrets/extra_ca >/tmp/ca.pem && export PIP_CERT=/tmp/ca.pem; \
    fi \
    && pip install --no-cache-dir --no-deps /opt/dagspec \
    && rm -f /tmp/ca.pem

# dags/, plugins/, pipelines/ and jobs/ are mounted by docker-compose.yml; the copies here let the
# image run on its own too.
COPY dags /opt/dagspec/dags
COPY plugins /opt/dagspec/plugins
COPY pipelines /opt/dagspec/pipelines
COPY data /opt/dagspec/data
COPY jobs /opt/dagspec/jobs
COPY deploy/job_check.py /opt/dagspec/deploy/job_check.py
COPY deploy/connect_tls.py /opt/dagspec/deploy/connect_tls.py

# An unprivileged user owns Airflow's home and the checkpoint store; named volumes mounted on
# these paths start with this ownership. /opt/connect/secrets (the Connect server's token, key and
# certificate, generated at the stack's first start: deploy/connect_tls.py), /opt/history/secrets
# (the Spark History Server's key) and /data/spark-events (query plans, conf) are their owner's alone.
RUN useradd --create-home --uid 50000 --gid 0 dagspec \
    && mkdir -p /opt/airflow/logs /opt/airflow/auth /data/storage /data/spark-events /opt/spark-work /opt/connect/secrets /opt/connect/ca /opt/history/secrets \
    && chown -R 50000:0 /opt/airflow /data /opt/spark-work /opt/dagspec /opt/connect /opt/history \
    && chmod -R g+rwX /opt/airflow /data /opt/spark-work \
    && chmod 700 /opt/connect/secrets /opt/history/secrets /data/spark-events

ENV AIRFLOW_HOME=/opt/airflow \
    DAGSPEC_HOME=/opt/dagspec \
    DAGSPEC_STORAGE_ROOT=/data/storage \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    SPARK_WORKER_DIR=/opt/spark-work \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    JDK_JAVA_OPTIONS="-XX:SharedArchiveFile=/opt/venv/share/dagspec/spark.jsa -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"

USER 50000
WORKDIR /opt/dagspec
# tini reaps the JVMs and task processes that Spark and Airflow fork.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]
