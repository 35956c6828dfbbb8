"""The FastAPI app of dagspec's UI view, mounted by the plugin on Airflow's API server at ``/dagspec``.

Every page sits behind Airflow's own authentication and authorization: the user comes from the
request's token (the ``Authorization`` header or the UI's ``_token`` cookie) and must be allowed
to read the DAG's runs, exactly as for Airflow's ``/api/v2/dags/{dag_id}/dagRuns``. Files are
served from the DAG's folder under the deployment's storage root, never a spec's, and only those of
committed checkpoints' ``files`` outputs (``files``). What a route cannot show (an unknown DAG,
run, stage or file) it raises as a ``PageError`` where it finds it; the app's one handler turns
that into an error page with its HTTP status.
"""

from __future__ import annotations

import mimetypes
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Protocol

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from dagspec.airflow.ui import URL_PREFIX, files, pages, spark
from dagspec.airflow.ui.results import (
    RunInfo,
    StageRow,
    TaskInfo,
    compare_runs,
    find_spec,
    missing_records_note,
    running_progress,
    stage_of,
    stage_rows,
)
from dagspec.errors import DagspecError
from dagspec.plan.history import read_run
from dagspec.spec.models import PipelineSpec
from dagspec.spec.roots import deployment_storage_root

__all__ = ["URL_PREFIX", "create_app"]
# the pages load nothing: images are inline, styles are in the page
PAGE_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
FILE_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox"
MAX_RUNS = 100


class RunStore(Protocol):
    """Where the pages read DAG runs and task instances (Airflow's metadata DB; a stand-in in tests)."""

    def run(self, dag_id: str, run_id: str) -> RunInfo | None: ...

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]: ...

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]: ...


class AirflowRunStore:
    """Runs and task instances from Airflow's metadata DB."""

    def run(self, dag_id: str, run_id: str) -> RunInfo | None:
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            found = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
            return _run_info(found) if found is not None else None

    def tasks(self, dag_id: str, run_id: str) -> dict[str, TaskInfo]:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            query = select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
            return {ti.task_id: TaskInfo(ti.state, ti.duration) for ti in session.scalars(query)}

    def recent(self, dag_id: str, limit: int) -> list[RunInfo]:
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            query = select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(limit)
            return [_run_info(run) for run in session.scalars(query)]


def _run_info(run: Any) -> RunInfo:
    """A ``DagRun`` row as the pages use it."""
    return RunInfo(
        dag_id=run.dag_id,
        run_id=run.run_id,
        state=str(run.state or ""),
        conf=dict(run.conf or {}),
        logical_date=run.logical_date,
        start_date=run.start_date,
    )


def run_store() -> RunStore:
    """The run store of the API server (overridden in tests)."""
    return AirflowRunStore()


_read_runs = requires_access_dag("GET", DagAccessEntity.RUN)


def can_read_runs(request: Request, user: GetUserDep) -> None:
    """Airflow's check for reading the runs of the path's ``dag_id``: 401 without a valid token,
    403 for a user the auth manager does not let read that DAG's runs."""
    _read_runs(request, user)


def can_read_all_runs(user: GetUserDep) -> None:
    """Airflow's check for reading every DAG's runs (the History Server shows every application):
    decided on no DAG at all, never on a ``dag_id`` the request names."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    if not get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.RUN, details=DagDetails(id=None), user=user
    ):
        raise HTTPException(403, "the Spark History Server shows every DAG's runs: this user may not read them all")


Store = Annotated[RunStore, Depends(run_store)]
READ = [Depends(can_read_runs)]


class PageError(HTTPException):
    """A request the app cannot answer with its page: raised where that is found, shown as an error
    page (a title, the message) with its HTTP status by the app's handler."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(status_code=status, detail=message)
        self.title = title
        self.message = message


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers={"Content-Security-Policy": PAGE_POLICY})


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _spec(dag_id: str) -> PipelineSpec:
    try:
        return find_spec(dag_id)
    except DagspecError as exc:
        raise PageError(404, dag_id, str(exc)) from exc


def _root() -> str:
    """The deployment's storage root (``$DAGSPEC_STORAGE_ROOT``, else the project's default): what
    the pages show and the file route serves from, whatever the spec's ``storage.root`` says."""
    return deployment_storage_root()


def _run_rows(dag_id: str, run_id: str, store: RunStore) -> tuple[str, RunInfo, list[StageRow], str]:
    """A run's storage root, its Airflow record, its stages as it recorded them and the page's note
    when it recorded none. Nothing of the run is resolved again."""
    spec = _spec(dag_id)
    run = store.run(dag_id, run_id)
    if run is None:
        raise PageError(404, dag_id, f"no run {run_id!r} of {dag_id}")
    root = _root()
    try:
        records = read_run(root, dag_id, run_id)
    except DagspecError as exc:
        raise PageError(409, f"{dag_id}: {run_id}", f"cannot read the run's records: {exc}") from exc
    kinds = {name: spec.stages[spec.written_stage(name)].kind for name in spec.stage_order()}
    tasks = store.tasks(dag_id, run_id)
    rows = stage_rows(spec.stage_order(), records, tasks, partial(running_progress, root, dag_id), kinds)
    return root, run, rows, missing_records_note(run, records)


def create_app() -> FastAPI:
    """The app the plugin mounts (``URL_PREFIX``)."""
    app = FastAPI(title="dagspec results", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(PageError)
    async def error_page(request: Request, exc: PageError) -> HTMLResponse:
        return _html(pages.error_page(exc.title, exc.message), exc.status_code)

    @app.get("/dags/{dag_id}/runs/{run_id}", dependencies=READ, response_class=HTMLResponse)
    def run_view(dag_id: str, run_id: str, request: Request, store: Store) -> HTMLResponse:
        root, run, rows, note = _run_rows(dag_id, run_id, store)
        return _html(pages.run_page(_base(request), run, rows, root, note))

    @app.get("/dags/{dag_id}/runs/{run_id}/stages/{task_id}", dependencies=READ, response_class=HTMLResponse)
    def stage_view(dag_id: str, run_id: str, task_id: str, request: Request, store: Store) -> HTMLResponse:
        root, run, rows, _ = _run_rows(dag_id, run_id, store)
        row = next((r for r in rows if r.name in (task_id, stage_of(task_id))), None)
        if row is None:
            raise PageError(404, dag_id, f"{task_id!r} is not a stage of run {run_id!r} of {dag_id}")
        return _html(pages.stage_page(_base(request), run, row, root))

    @app.get("/dags/{dag_id}/compare", dependencies=READ, response_class=HTMLResponse)
    def compare_view(
        dag_id: str,
        request: Request,
        store: Store,
        metric: str = "roc_auc",
        n: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 10,
    ) -> HTMLResponse:
        _spec(dag_id)  # a DAG of dagspec's, else a 404
        compared = compare_runs(_root(), store.recent(dag_id, n))
        return _html(pages.compare_page(_base(request), dag_id, compared, metric, n))

    @app.get("/dags/{dag_id}/files/{path:path}", dependencies=READ)
    def file_view(dag_id: str, path: str) -> Response:
        _spec(dag_id)  # a DAG of dagspec's, else a 404
        try:  # the deployment's root, never the spec's; refused and missing alike are a 404
            found = files.stored_file(_root(), dag_id, path)
        except files.NotServedError:
            raise PageError(404, "not found", f"no file {path!r} in {dag_id}'s checkpoints") from None
        content = files.read_bytes(found.path)
        if content is None:
            raise PageError(413, "too large", f"{path} is larger than the UI serves")
        kind = mimetypes.guess_type(Path(found.relative).name)[0] or "application/octet-stream"
        headers = {"Content-Security-Policy": FILE_POLICY, "X-Content-Type-Options": "nosniff"}
        return Response(content, media_type=kind, headers=headers)

    @app.get("/spark/dags/{dag_id}/runs/{run_id}/stages/{task_id}", dependencies=READ)
    def spark_ui(dag_id: str, run_id: str, task_id: str, request: Request, store: Store) -> RedirectResponse:
        """A task's "Spark UI" link: the jobs of the application that computed the stage, in the
        History Server; while the stage has recorded nothing yet, the running applications."""
        _spec(dag_id)
        if store.run(dag_id, run_id) is None:
            raise PageError(404, dag_id, f"no run {run_id!r} of {dag_id}")
        found = spark.stage_application(_root(), dag_id, run_id, stage_of(task_id))
        target = found.jobs_path() if found else "/?showIncomplete=true"
        return RedirectResponse(f"{_base(request)}{spark.HISTORY_PATH}{target}", status_code=307)

    @app.get(spark.HISTORY_PATH + "/{path:path}", dependencies=[Depends(can_read_all_runs)])
    def spark_history(path: str, request: Request) -> Response:
        """Spark's History Server, forwarded with its token to users who may read every DAG's runs."""
        server = spark.history_server()
        if server is None:
            raise PageError(
                503,
                "Spark History Server",
                "no Spark History Server runs for this deployment: start one with `dagspec history up` "
                "(dagspec airflow up starts it), or set the connection spark_history_default",
            )
        try:
            answer = spark.forward(server, path, request.url.query, f"{_base(request)}{spark.HISTORY_PATH}")
        except OSError as exc:
            raise PageError(
                502, "Spark History Server", f"the Spark History Server at {server.url} did not answer: {exc}"
            ) from exc
        headers = {**answer.headers, "Content-Security-Policy": spark.POLICY, "X-Content-Type-Options": "nosniff"}
        return Response(answer.body, status_code=answer.status, headers=headers)

    return app
