"""Health check of an Airflow component of docker-compose.yml: is its job heartbeating?

    python /opt/dagspec/deploy/job_check.py SchedulerJob [max_age_s]

The same question as `airflow jobs check --job-type X --hostname $HOSTNAME`, asked of the metadata
DB directly: a running job of that type on this host whose last heartbeat is at most max_age_s
(default 60) old. `airflow jobs check` imports all of Airflow for it: 4.8 s of CPU per call,
measured in the stack on the 2-core CI machine, so three components checked every 30 s took a
quarter of the machine; this takes about 0.1 s. Exit 0 healthy, 1 not (the cause on stderr).
"""

from __future__ import annotations

import os
import socket
import sys

import psycopg2


def main(argv: list[str]) -> int:
    job_type = argv[1]
    max_age = float(argv[2]) if len(argv) > 2 else 60.0
    # postgresql+psycopg2://user:password@host:port/db -> a libpq URI
    url = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("postgresql+psycopg2://", "postgresql://", 1)
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    try:
        with psycopg2.connect(url, connect_timeout=5) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM now() - max(latest_heartbeat)) FROM job "
                "WHERE job_type = %s AND hostname = %s AND state = 'running'",
                (job_type, host),
            )
            row = cur.fetchone()
    except psycopg2.Error as exc:
        print(f"the metadata DB did not answer: {str(exc).strip()}", file=sys.stderr)
        return 1
    age = None if row is None or row[0] is None else float(row[0])
    if age is None:
        print(f"no running {job_type} on {host}", file=sys.stderr)
        return 1
    if age > max_age:
        print(f"{job_type} on {host}: last heartbeat {age:.0f} s ago (more than {max_age:.0f} s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
