"""dagspec's view in the Airflow UI, route by route (FastAPI's TestClient, no server, no Spark).

The checkpoints are committed by hand at the fingerprints the shipped topology spec resolves to,
with the files its stages write (a comparison report with its ROC plot, a model card, check
results), and each run's records are written by the operator's own functions, so the pages read
what a real run leaves. (A real `dagspec run` whose input changes between two runs:
tests/local/test_run_history.py.)
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dagspec.airflow.ui import app as view
from dagspec.airflow.ui.results import RunInfo, TaskInfo, find_spec
from dagspec.kinds.model_card import ModelCard, TrainingData
from dagspec.plan.history import stage_record, write_stage_record
from dagspec.plan.resolve import ResolvedStage, default_context, resolve_pipeline
from dagspec.spec.models import PipelineSpec
from tests.conftest import REPO
from tests.kinds.reports import evaluation_report

DAG = "topology_classifier"
STARTED = datetime(2026, 12, 3, 20, 0, tzinfo=UTC)
REPORT = """# Topology classifier

| model | roc_auc | auc_QCD | auc_tt |
|---|---:|---:|---:|
| hlf_dense | 0.9971 | 0.9973 | 0.9972 |

![ROC curves](roc.png)
"""


def png(width: int = 3, height: int = 2) -> bytes:
    """A valid RGB PNG (red pixels)."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


class Runs:
    """Three finished runs of the DAG (a stand-in for Airflow's DB): the defaults, one with 3 epochs,
    and one from before runs were recorded."""

    def __init__(self) -> None:
        self.runs = {  # newest first
            "manual__new": RunInfo(DAG, "manual__new", "success", {}, None, STARTED),
            "manual__old": RunInfo(DAG, "manual__old", "success", {"epochs": 3}, None, STARTED.replace(hour=19)),
            "manual__unrecorded": RunInfo(DAG, "manual__unrecorded", "success", {}, None, STARTED.replace(hour=18)),
        }

    def run(self, dag_id: str, run_id: str) -> RunInfo | None:
        return self.runs.get(run_id) if dag_id == DAG else None

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]:
        return {"comparison": TaskInfo("success", 3.1), "hlf_classifier": TaskInfo("success", 12.0)}

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]:
        return list(self.runs.values())[:limit]


def _card(fingerprint: str) -> str:
    data = TrainingData(stage="split", output="train", fingerprint=fingerprint)
    card = ModelCard(flavor="keras", kind="train_keras", artifact="model.keras", task="multiclass", classes=[0, 1, 2],
                     class_names=["QCD", "tt", "W+jets"], label_col="encoded_label", input_columns=["HLF_input"],
                     params={"epochs": 10}, trained_on={"train": data}, train_time_s=7.2)  # fmt: skip
    return card.model_dump_json()


def resolve_run(spec: PipelineSpec, run: RunInfo) -> dict[str, ResolvedStage]:
    """The run's stages as its tasks resolve them (the run's conf over the defaults, its run id)."""
    return resolve_pipeline(spec, {**default_context(spec, run.conf), "run_id": run.run_id})


def _commit(stage: ResolvedStage, run: RunInfo, auc: float) -> None:
    """A committed checkpoint of ``stage`` as its job would leave it (manifest last, then _SUCCESS),
    and the run's record of the stage, as the operator writes it when the task ends."""
    path = Path(stage.checkpoint_dir)
    if not (path / "_SUCCESS").exists():  # else committed by an earlier run: this one finds it (a hit)
        _write_checkpoint(stage, run, auc)
    manifest = json.loads((path / "manifest.json").read_text())
    write_stage_record(stage.storage_root, stage_record(stage, manifest, run.run_id, 1))


def _write_checkpoint(stage: ResolvedStage, run: RunInfo, auc: float) -> None:
    path = Path(stage.checkpoint_dir)
    path.mkdir(parents=True, exist_ok=True)
    for output in stage.outputs:
        (path / output).mkdir(parents=True, exist_ok=True)
    metrics: dict[str, Any] = {}
    if stage.kind == "evaluate":
        metrics = {"roc_auc": auc, "roc_auc_per_class": {"0": auc, "1": auc - 0.01}, "log_loss": 0.09}
        names = {"0": "QCD", "1": "tt", "2": "W+jets"}
        evaluation_report((0, 1, 2), model=stage.inputs["model"].stage, class_names=names, roc_auc=auc).write(
            path / "report"
        )
    if stage.name == "features_checked":
        metrics = {"results": [{"column": "label", "rule": "not_null", "observed": "0 null rows", "passed": True}]}
    if stage.name == "comparison":
        (path / "report" / "comparison.md").write_text(REPORT)
        (path / "report" / "roc.png").write_bytes(png())
    if stage.kind == "train_keras":
        (path / "model" / "model.json").write_text(_card(stage.inputs["train"].fingerprint))
    rows = {o: 1000 for o, kind in stage.outputs.items() if kind == "table"}
    manifest = {
        "fingerprint": stage.fingerprint, "stage": stage.name, "kind": stage.kind, "params": stage.params_json(),
        "outputs": {o: {"type": str(t)} for o, t in stage.outputs.items()}, "rows": rows, "metrics": metrics,
        "content": {o: f"{stage.fingerprint}-{o}" for o in stage.outputs}, "duration_s": 2.5,
        "started": run.start_date.isoformat() if run.start_date else "", "finished": STARTED.isoformat(),
        "run_id": run.run_id,
    }  # fmt: skip
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "_SUCCESS").write_text("")


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Both runs committed, stage after stage (a stage's fingerprint holds its upstreams' content)."""
    root = tmp_path_factory.mktemp("view")
    pipelines = root / "pipelines"
    pipelines.mkdir()
    shutil.copy(REPO / "pipelines" / f"{DAG}.yaml", pipelines)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSPEC_HOME", str(REPO))
        env.setenv("DAGSPEC_PIPELINES", str(pipelines))
        env.setenv("DAGSPEC_STORAGE_ROOT", str(root / "storage"))
        spec = find_spec(DAG)
        runs = Runs().runs
        for run, auc in ((runs["manual__old"], 0.95), (runs["manual__new"], 0.997)):  # oldest first
            for name in spec.stage_order():
                _commit(resolve_run(spec, run)[name], run, auc)
        yield root / "storage"


@pytest.fixture
def client(storage: Path) -> TestClient:
    """The app with Airflow's DB replaced by ``Runs`` and a user allowed to read every DAG."""
    app = view.create_app()
    app.dependency_overrides[view.run_store] = Runs
    app.dependency_overrides[view.can_read_runs] = lambda: None
    return TestClient(app)


def test_no_token_is_refused(storage: Path) -> None:
    app = view.create_app()
    app.dependency_overrides[view.run_store] = Runs
    client = TestClient(app)
    for path in (f"/dags/{DAG}/runs/manual__new", f"/dags/{DAG}/compare", f"/dags/{DAG}/files/x/manifest.json"):
        response = client.get(path)
        assert response.status_code == 401, path
        assert DAG not in response.text  # nothing of the results


def test_a_user_who_cannot_read_the_dag_cannot_read_its_results(storage: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.api_fastapi.core_api import security
    from airflow.models.dag import DagModel

    asked: list[tuple[str, Any]] = []

    class OtherDagsOnly:
        def is_authorized_dag(self, *, method: str, access_entity: Any, details: Any, user: Any) -> bool:
            asked.append((method, details.id))
            return bool(details.id == "another_dag")

    monkeypatch.setattr(security, "get_auth_manager", OtherDagsOnly)
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **_: None))
    app = view.create_app()
    app.dependency_overrides[view.run_store] = Runs
    app.dependency_overrides[security.get_user] = lambda: object()
    response = TestClient(app).get(f"/dags/{DAG}/runs/manual__new")
    assert response.status_code == 403
    assert asked == [("GET", DAG)]


def test_the_run_page_lists_every_stage_with_its_fingerprint_state_and_rows(client: TestClient) -> None:
    spec = find_spec(DAG)
    page = client.get(f"/dags/{DAG}/runs/manual__new")
    assert page.status_code == 200, page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    plan = resolve_run(spec, Runs().runs["manual__new"])
    old = resolve_run(spec, Runs().runs["manual__old"])
    for name, stage in plan.items():
        assert f">{name}</a>" in page.text and stage.fingerprint in page.text
    # the stages the epochs do not reach were computed by the older run: this one found them committed
    ran = [name for name, stage in plan.items() if stage.fingerprint != old[name].fingerprint]
    assert "hlf_classifier" in ran and "split" not in ran
    assert page.text.count('class="ran">ran<') == len(ran)
    assert page.text.count('class="hit">hit<') == len(plan) - len(ran)
    assert page.text.count('class="committed">committed<') == len(plan)  # each recorded checkpoint is still there
    assert '<td class="num">1,000</td>' in page.text  # rows in / out
    # the older run's page shows what it ran, though the newer one committed other fingerprints since
    older = client.get(f"/dags/{DAG}/runs/manual__old").text
    assert old["hlf_classifier"].fingerprint in older and plan["hlf_classifier"].fingerprint not in older
    assert older.count('class="ran">ran<') == len(plan)


def test_a_run_from_before_run_records_says_so_and_shows_no_fingerprint(client: TestClient) -> None:
    spec = find_spec(DAG)
    page = client.get(f"/dags/{DAG}/runs/manual__unrecorded")
    assert page.status_code == 200, page.text
    assert "No record of what this run ran: it ran before dagspec recorded runs" in page.text
    today = resolve_run(spec, Runs().runs["manual__unrecorded"])  # the defaults: what manual__new committed
    assert not any(stage.fingerprint in page.text for stage in today.values())
    assert 'class="ran">ran<' not in page.text and 'class="hit">hit<' not in page.text
    assert page.text.count("not recorded") == 2  # its two tasks Airflow knows of, nothing more
    stage = client.get(f"/dags/{DAG}/runs/manual__unrecorded/stages/comparison").text
    assert "no record of this stage in this run (its task: success)" in stage and "auc_QCD" not in stage


def test_a_report_is_rendered_with_its_table_and_plot_inline(client: TestClient) -> None:
    page = client.get(f"/dags/{DAG}/runs/manual__new/stages/comparison")
    assert page.status_code == 200, page.text
    assert '<th style="text-align:right">auc_QCD</th>' in page.text  # the markdown table as HTML
    assert '<td style="text-align:right">0.9971</td>' in page.text
    # the plot the report names, inline: Airflow's sandboxed iframe sends no cookie for an <img> URL
    assert f'alt="ROC curves" src="data:image/png;base64,{base64.b64encode(png()).decode()}"' in page.text


def test_a_model_card_and_check_results_are_shown(client: TestClient) -> None:
    card = client.get(f"/dags/{DAG}/runs/manual__new/stages/hlf_classifier").text
    assert "Model card" in card and "0 = QCD, 1 = tt, 2 = W+jets" in card and "train_keras" in card
    check = client.get(f"/dags/{DAG}/runs/manual__new/stages/features_checked").text
    assert "Check results" in check and "0 null rows" in check and ">ok<" in check


def test_an_evaluation_report_is_shown_and_an_old_card_or_a_newer_report_refused(client: TestClient) -> None:
    page = client.get(f"/dags/{DAG}/runs/manual__new/stages/hlf_eval").text
    assert "Evaluation report" in page and "<td>W+jets</td>" in page and '<td class="num">0.9970</td>' in page
    # the files as the readers get them: the same refusals as predict, evaluate, gate and compare
    spec = find_spec(DAG)
    plan = resolve_run(spec, Runs().runs["manual__new"])
    card_file = Path(plan["hlf_classifier"].checkpoint_dir) / "model" / "model.json"
    report_file = Path(plan["hlf_eval"].checkpoint_dir) / "report" / "metrics.json"
    card_text, report_text = card_file.read_text(), report_file.read_text()
    try:
        card_file.write_text(json.dumps({k: v for k, v in json.loads(card_text).items() if k != "card_version"}))
        report_file.write_text(json.dumps({**json.loads(report_text), "report_version": 2}))
        card_page = client.get(f"/dags/{DAG}/runs/manual__new/stages/hlf_classifier").text
        assert (
            "model/model.json was written before model cards were versioned (no card_version); this dagspec reads "
            "card_version 1: run its training stage again"
        ) in card_page
        assert "Model card" not in card_page
        report_page = client.get(f"/dags/{DAG}/runs/manual__new/stages/hlf_eval").text
        assert (
            "report/metrics.json has report_version 2, newer than this dagspec reads (report_version 1): upgrade "
            "dagspec, or run its evaluate stage again"
        ) in report_page
    finally:
        card_file.write_text(card_text)
        report_file.write_text(report_text)


def test_compare_shows_a_metric_per_run_and_the_params_that_differed(client: TestClient) -> None:
    page = client.get(f"/dags/{DAG}/compare", params={"metric": "roc_auc", "n": 5})
    assert page.status_code == 200, page.text
    assert "<th>param epochs</th>" in page.text and "<th>param events</th>" not in page.text
    for stage in ("hlf_eval", "gru_eval", "inclusive_eval"):
        assert f"<th>{stage}</th>" in page.text
    assert '<td class="num">0.9970</td>' in page.text and '<td class="num">0.9500</td>' in page.text
    assert page.text.count("<polyline") == 3  # one line per evaluation, through both runs
    assert "no record of what this run ran (older than run records)" in page.text


def test_a_removed_checkpoint_leaves_the_runs_record(client: TestClient, storage: Path) -> None:
    spec = find_spec(DAG)
    old = resolve_run(spec, Runs().runs["manual__old"])["hlf_eval"]
    aside = Path(old.checkpoint_dir).with_name("aside")
    Path(old.checkpoint_dir).rename(aside)  # as `dagspec gc` would remove it
    try:
        page = client.get(f"/dags/{DAG}/runs/manual__old/stages/hlf_eval").text
        assert "removed since (dagspec gc)" in page and old.fingerprint in page
        assert "<h2>Metrics</h2>" in page and "0.95" in page  # as the run recorded them
        assert "<h2>Files</h2>" not in page
    finally:
        aside.rename(old.checkpoint_dir)


def test_files_of_committed_outputs_are_served_and_nothing_else(
    client: TestClient, storage: Path, tmp_path: Path
) -> None:
    report = next((storage / DAG / "comparison").glob("*/report/comparison.md"))
    checkpoint = report.parent.parent
    inside = report.relative_to(storage / DAG).as_posix()
    served = client.get(f"/dags/{DAG}/files/{inside}")
    assert served.status_code == 200 and served.text == REPORT
    assert "sandbox" in served.headers["content-security-policy"]
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the UI")
    (report.parent / "escape").symlink_to(secret)
    (checkpoint / "notes.txt").write_text("not for the UI")  # beside the outputs: in no output of the manifest
    tabled = next(m.parent for m in (storage / DAG).glob("*/*/manifest.json") if '"table"' in m.read_text())
    table = next(
        n for n, t in json.loads((tabled / "manifest.json").read_text())["outputs"].items() if t["type"] == "table"
    )
    (tabled / table / "part-0.txt").write_text("not for the UI")  # a table output's folder
    in_table = f"{tabled.relative_to(storage / DAG).as_posix()}/{table}/part-0.txt"
    uncommitted = checkpoint.parent / "f00d" / "report"  # a report in a checkpoint without _SUCCESS
    uncommitted.mkdir(parents=True)
    (uncommitted / "x.md").write_text("not for the UI")
    watch = storage / DAG / "_watch"  # a files schedule's record of seen files
    watch.mkdir()
    (watch / "0123456789abcdef.json").write_text('{"seen": {"/not/for/the/ui": [1, 2]}}')
    fp = checkpoint.name
    refused = {
        "a file beside the outputs": f"comparison/{fp}/notes.txt",
        "the manifest": f"comparison/{fp}/manifest.json",
        "the marker": f"comparison/{fp}/_SUCCESS",
        "a table output": in_table,
        "an uncommitted checkpoint": "comparison/f00d/report/x.md",
        "the watch records": "_watch/0123456789abcdef.json",
        "the stage's pointer": "comparison/_LATEST",
        "a symlink out of the output": f"comparison/{fp}/report/escape",
        "..": f"comparison/%2E%2E/%2E%2E/{DAG}/{inside}",
        "an encoded ..": f"comparison/{fp}/report/..%2F..%2F..%2Fmanifest.json",
        "absolute": str(secret),
        "/proc": "/proc/self/cmdline",
        "a URI": "file:///proc/self/status",
        "another dag": "..%2Fother/x",
        "missing": f"comparison/{fp}/report/none.md",
    }
    for what, path in refused.items():
        response = client.get(f"/dags/{DAG}/files/{path}")
        assert response.status_code == 404, (what, response.status_code)
        assert f"in {DAG}&#x27;s checkpoints" in response.text, (what, response.text)  # the route said so
        assert "not for the UI" not in response.text


def test_the_specs_storage_root_is_ignored_for_the_deployments(
    client: TestClient, storage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a spec whose own root (allowed by the administrator) is not the deployment's: its checkpoints
    # there are not served, the same files under the deployment's root are
    pipelines, own = tmp_path / "pipelines", tmp_path / "own-root"
    pipelines.mkdir()
    (pipelines / "rooted.yaml").write_text(
        f"dag_id: rooted\nstorage: {{root: '{own}'}}\n"
        "stages:\n  raw: {kind: read, params: {format: tsv, path: data/x.tsv, schema: criteo}}\n"
    )
    monkeypatch.setenv("DAGSPEC_PIPELINES", str(pipelines))
    monkeypatch.setenv("DAGSPEC_STORAGE_ROOTS", str(own))
    assert find_spec("rooted").storage.root == str(own)
    for root, text in ((own, "the spec's root"), (storage, "the deployment's root")):
        checkpoint = root / "rooted" / "raw" / "fp1"
        (checkpoint / "report").mkdir(parents=True)
        (checkpoint / "report" / "a.md").write_text(text)
        (checkpoint / "manifest.json").write_text(
            json.dumps({"fingerprint": "fp1", "outputs": {"report": {"type": "files"}}})
        )
        (checkpoint / "_SUCCESS").write_text("")
    assert client.get("/dags/rooted/files/raw/fp1/report/a.md").text == "the deployment's root"
    shutil.rmtree(storage / "rooted")
    assert client.get("/dags/rooted/files/raw/fp1/report/a.md").status_code == 404


def test_a_remote_storage_root_is_read_through_fsspec_with_the_same_boundary() -> None:
    import fsspec

    from dagspec.airflow.ui import files

    memory = fsspec.filesystem("memory")
    checkpoint = "/view-root/dag/comparison/fp"
    memory.pipe(f"{checkpoint}/report/comparison.md", REPORT.encode())
    memory.pipe(f"{checkpoint}/notes.txt", b"not served")
    memory.pipe(
        f"{checkpoint}/manifest.json",
        json.dumps({"fingerprint": "fp", "outputs": {"report": {"type": "files"}}}).encode(),
    )
    assert files.checkpoint_files(f"memory:/{checkpoint}", set()) == []  # not committed yet
    with pytest.raises(files.NotServedError):
        files.stored_file("memory://view-root", "dag", "comparison/fp/report/comparison.md")
    memory.pipe(f"{checkpoint}/_SUCCESS", b"")
    found = files.stored_file("memory://view-root", "dag", "comparison/fp/report/comparison.md")
    assert files.read_bytes(found.path) == REPORT.encode()
    assert files.checkpoint_files(f"memory:/{checkpoint}", set()) == ["report/comparison.md"]
    for path in (
        "comparison/fp/notes.txt",
        "../dag/comparison/fp/report/comparison.md",
        "/view-root/dag/x",
        "memory://view-root/dag/x",
    ):
        with pytest.raises(files.NotServedError):
            files.stored_file("memory://view-root", "dag", path)
