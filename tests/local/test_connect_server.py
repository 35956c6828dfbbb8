"""The local Spark Connect server: started once and reused, recorded in the manifests of the stages it
computes, and a server killed mid-stage fails the attempt with a clear message while the retry
starts a new server and completes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagspec.job.connect_auth import server_token, with_token
from dagspec.job.connect_server import ServerSettings, answering, ensure_server, our_server, stop_server
from dagspec.job.server_identity import ServerIdentity
from dagspec.processes import default_run_dir, free_port
from tests.conftest import REPO
from tests.helpers import DAGSPEC

pytestmark = pytest.mark.integration

# ~1e8 joined rows: seconds of work (well over the second before the kill), so the server can be
# killed while the stage's client waits; the retry runs it in full, so no more than that
SLOW_SPEC = """
dag_id: connect_kill
default_args: {retries: 1, retry_delay: 1}
stages:
  slow:
    kind: sql
    params: {query: "SELECT sum(a.id * b.id) AS s FROM range(20000) a CROSS JOIN range(5000) b"}
"""


def _server_pid() -> int:
    # the server answering on the port, where it is recorded: this project's run folder, or another
    # folder of this project (the session's live Airflow, tests/airflow/conftest.py, starts it in its own)
    found = our_server(default_run_dir(REPO), ServerSettings.from_env().port, ServerIdentity.current(REPO))
    assert found is not None
    return found[0].processes[0].pid


def _client_running(run_dir: Path) -> bool:
    """A stage's Connect client of the run whose environment names ``run_dir`` is alive (a client
    started ahead has its stage from stdin: not in its argv)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "run_stage.py" in cmdline and f"DAGSPEC_RUN_DIR={run_dir}\0" in environ:
            return True
    return False


def test_the_server_is_started_once_and_reused() -> None:
    url = ensure_server(REPO)
    pid = _server_pid()
    assert url == ServerSettings.from_env().url and answering(ServerSettings.from_env().port)
    assert ensure_server(REPO) == url and _server_pid() == pid
    status = subprocess.run([DAGSPEC, "connect", "status"], capture_output=True, text=True, check=True, cwd=REPO)
    assert f"Spark Connect server: up  {url}  (pid {pid}" in status.stdout


# A stage run in a Connect client process of its own (as under Airflow) through the real runtime
STAGE_IN_A_CLIENT = """
import json, sys
from pathlib import Path
from dagspec.job.session import create_session
from dagspec.spec.loader import load_spec
from tests.helpers import manifest, run_pipeline_in_process
spark = create_session("manifest-server", remote=sys.argv[2])
print(json.dumps(manifest(run_pipeline_in_process(spark, load_spec(Path(sys.argv[1])))["few"])))
"""


def test_a_connect_stages_manifest_records_the_server_that_computed_it(tmp_path: Path) -> None:
    url = ensure_server(REPO)
    client = with_token(url, server_token(REPO))  # sc://localhost:PORT/;token=...
    spec = tmp_path / "p" / "pipe.yaml"
    spec.parent.mkdir()
    spec.write_text("stages:\n  few: {kind: sql, params: {query: 'SELECT id FROM range(3)'}}\n")
    env = {**os.environ, "DAGSPEC_HOME": str(REPO), "DAGSPEC_STORAGE_ROOT": str(tmp_path / "storage")}
    done = subprocess.run(
        [sys.executable, "-c", STAGE_IN_A_CLIENT, str(spec), f"{client};session_id=0c6d9d4e-2f49-4f5a-9d0e-6a3c1c1b2a11"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    server = json.loads(done.stdout.splitlines()[-1])["server"]
    assert server.pop("app_id").startswith("local-") and "token" not in done.stdout
    assert server == {
        "url": url.replace("127.0.0.1", "localhost"),  # without the token and the session id
        "spark_version": server["spark_version"],
        "app_name": "dagspec-connect",
        "dagspec_server": {**ServerIdentity.current(REPO).as_info(), "pid": _server_pid()},
    }


@pytest.mark.system
def test_a_killed_server_fails_the_attempt_clearly_and_the_retry_restarts_it(
    tmp_path: Path, airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a server of its own (port and run folder): killing the session's shared server let another
    # test's stage start a new one on the same port before this client's gRPC retries gave up, and
    # the client's reattach then ran the query again there: an attempt that never failed
    monkeypatch.setenv("DAGSPEC_CONNECT_PORT", str(free_port()))
    monkeypatch.setenv("DAGSPEC_RUN_DIR", str(tmp_path / "run"))
    ensure_server(REPO)
    old_pid = _server_pid()
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    spec = pipelines / "connect_kill.yaml"
    spec.write_text(SLOW_SPEC)
    keep = {"DAGSPEC_CONNECT_PORT", "DAGSPEC_RUN_DIR"}  # the server ensure_server above started
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DAGSPEC")) or k in keep}
    env.update(DAGSPEC_HOME=str(REPO), DAGSPEC_AIRFLOW_HOME=str(airflow_home), DAGSPEC_MODE="connect")
    try:
        run = subprocess.Popen(
            [DAGSPEC, "run", str(spec), "--storage-root", str(tmp_path / "storage")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )
        attempts = tmp_path / "storage" / "connect_kill" / "slow"
        deadline = time.time() + 300
        # the attempt folder exists once the client has its session and the lease: the query is next
        while time.time() < deadline and run.poll() is None and not list(attempts.glob("_tmp-*")):
            time.sleep(0.1)
        assert _client_running(tmp_path / "run"), "the stage ended before the server could be killed"
        time.sleep(1)
        os.killpg(old_pid, signal.SIGKILL)
        output = run.communicate(timeout=600)[0]
        assert run.returncode == 0, output
        log = (REPO / output.split("log: ")[1].split()[0]).read_text()
        causes = [line for line in log.splitlines() if "ERROR" in line or "error" in line]
        assert "the Spark Connect server sc://127.0.0.1:" in log and "stopped answering" in log, causes[-20:]
        assert "a retry runs the stage again and restarts the local server" in log
        assert _server_pid() != old_pid and answering(ServerSettings.from_env().port)
        assert list((tmp_path / "storage" / "connect_kill" / "slow").glob("*/_SUCCESS"))
    finally:
        stop_server(REPO)
