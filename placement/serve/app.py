"""The HTTP face of the service: :func:`create_app` builds the FastAPI app around one
:class:`~placement.serve.service.Service` (docs/serve.md lists the endpoints).

Each route reads its body itself (:func:`placement.serve.bodies.parse`: FastAPI's own
parsing takes NaN), runs the change in a worker thread (a step may take a while; the
event loop keeps answering reads and /healthz meanwhile) and answers with the dict the
service returns. Every refusal, FastAPI's own 404 and 405 included, is a JSON
``{"error", "field"}``; an unexpected exception is a 500 of the same shape, after the
service has put its state back.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from placement.serve import bodies, extender, views
from placement.serve.body_limit import MAX_BODY_BYTES, BodyLimit
from placement.serve.errors import Rejected
from placement.serve.service import Service

__all__ = ["create_app"]

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": bodies.ErrorBody, "description": what}
    for status, what in ((400, "not strict JSON"), (404, "unknown job or machine"),
                         (409, "conflicts with the state (duplicate id, ended job, slot out of order)"),
                         (413, "body over the limit"), (415, "not JSON"), (422, "a field is wrong"))}


def create_app(service: Service, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The app serving ``service``; bodies above ``max_body_bytes`` are refused (413)."""
    app = FastAPI(title="placement serve", version=_version(),
                  description="The online scheduler of `placement` over HTTP: submit jobs, report "
                  "progress, step slot by slot. Every accepted change is in the --state file before "
                  "the answer is sent (docs/serve.md).")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _handlers(app)

    @app.get("/healthz", tags=["reads"])
    async def healthz() -> JSONResponse:
        """Alive; the last slot stepped and the open jobs."""
        return JSONResponse(views.health(service.document))

    @app.get("/state", tags=["reads"])
    async def state() -> JSONResponse:
        """Settings, cluster figures, every open job's record, closed jobs, the last step."""
        return JSONResponse(views.summary(service.document))

    @app.get("/cluster", tags=["reads"])
    async def cluster() -> JSONResponse:
        """The cluster now (after machine events), in the instance format."""
        return JSONResponse(views.cluster(service.document))

    @app.get("/jobs/{job_id:path}", tags=["reads"], responses=_ERRORS)
    async def read_job(job_id: str) -> JSONResponse:
        """One job's record (open), or its end (finished, cancelled)."""
        return JSONResponse(views.job(service.document, job_id))

    @app.post("/jobs", status_code=201, tags=["jobs"], responses=_ERRORS,
              openapi_extra=bodies.openapi(bodies.SubmitBody))
    async def submit(request: Request) -> JSONResponse:
        """Submit a job (instance format); it runs from its arrival slot (default: the next)."""
        body = await _parse(request, bodies.SubmitBody)
        job, given = bodies.job(body.job, service.information, estimate=body.estimate)
        out = await run_in_threadpool(lambda: service.submit(job, estimate=body.estimate, label=body.label,
                                                             arrival_given=given))
        return JSONResponse(out, status_code=201, headers={"Location": f"/jobs/{quote(job.id, safe='')}"})

    @app.put("/jobs/{job_id:path}", tags=["jobs"], responses=_ERRORS, openapi_extra=bodies.openapi(bodies.ReviseBody))
    async def revise(job_id: str, request: Request) -> JSONResponse:
        """Re-describe an open job (measured speed, size, shape); it keeps its progress."""
        body = await _parse(request, bodies.ReviseBody)
        job, given = bodies.job(body.job, service.information, job_id=job_id)
        return JSONResponse(await run_in_threadpool(lambda: service.revise(job, arrival_given=given)))

    @app.post("/jobs/{job_id:path}/progress", tags=["jobs"], responses=_ERRORS,
              openapi_extra=bodies.openapi(bodies.ProgressBody))
    async def progress(job_id: str, request: Request) -> JSONResponse:
        """Report the batches done so far (the cluster's measure), and/or that the job finished."""
        body = await _parse(request, bodies.ProgressBody)
        return JSONResponse(await run_in_threadpool(lambda: service.report(job_id, done=body.done,
                                                                       finished=body.finished)))

    @app.delete("/jobs/{job_id:path}", tags=["jobs"], responses=_ERRORS)
    async def cancel(job_id: str) -> JSONResponse:
        """Cancel an open job (its id stays taken)."""
        return JSONResponse(await run_in_threadpool(service.cancel, job_id))

    @app.post("/machines", status_code=201, tags=["cluster"], responses=_ERRORS,
              openapi_extra=bodies.openapi(bodies.MachineBody))
    async def add_machine(request: Request) -> JSONResponse:
        """A machine joined (repair or growth) below a switch."""
        body = await _parse(request, bodies.MachineBody)
        machine = bodies.machine(body.machine)
        out = await run_in_threadpool(service.add_machine, machine, body.parent_switch, body.gbps)
        return JSONResponse(out, status_code=201)

    @app.delete("/machines/{machine_id:path}", tags=["cluster"], responses=_ERRORS)
    async def remove_machine(machine_id: str) -> JSONResponse:
        """A machine failed or left; the jobs it ran are placed again at the next step."""
        return JSONResponse(await run_in_threadpool(service.remove_machine, machine_id))

    @app.post("/step", tags=["slots"], responses=_ERRORS, openapi_extra=bodies.openapi(bodies.StepBody, False))
    async def step(request: Request) -> JSONResponse:
        """Decide the next slot (or slot t): job -> machine -> [workers, ps]. Asking the last
        slot again answers it as before (replayed: true)."""
        body = await _parse(request, bodies.StepBody, empty_ok=True)
        stepped = await run_in_threadpool(service.step, body.t)
        timing = f"step;dur={stepped.decide_seconds * 1e3:.3f}, checkpoint;dur={stepped.checkpoint_seconds * 1e3:.3f}"
        return JSONResponse(stepped.body, headers={"Server-Timing": timing})

    @app.post("/extender/filter", tags=["extender"], responses=_ERRORS)
    async def extender_filter(request: Request) -> JSONResponse:
        """kube-scheduler extender ``filter``: a pod labelled ``placement/job: J`` passes only the
        nodes of J's allocation in the last step (ExtenderArgs in, ExtenderFilterResult out)."""
        args = bodies.json_body(await request.body(), request.headers.get("content-type"))
        return JSONResponse(extender.filter_nodes(service.document, args))

    @app.post("/extender/prioritize", tags=["extender"], responses=_ERRORS)
    async def extender_prioritize(request: Request) -> JSONResponse:
        """kube-scheduler extender ``prioritize``: J's nodes scored by its tasks there, 0..10."""
        args = bodies.json_body(await request.body(), request.headers.get("content-type"))
        return JSONResponse(extender.prioritize(service.document, args))

    return app


async def _parse(request: Request, model: type[bodies.M], empty_ok: bool = False) -> bodies.M:
    return bodies.parse(await request.body(), request.headers.get("content-type"), model, empty_ok=empty_ok)


def _handlers(app: FastAPI) -> None:
    """Every error as ``{"error", "field"}`` (module docstring)."""

    @app.exception_handler(Rejected)
    async def rejected(request: Request, exc: Rejected) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail), "field": None}, status_code=exc.status_code,
                            headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = exc.errors()[0]
        field = ".".join(str(k) for k in error.get("loc", ())[1:]) or None
        return JSONResponse({"error": str(error.get("msg", "invalid request")), "field": field}, status_code=422)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        what = (f"the state file could not be written: {exc.strerror or exc}" if isinstance(exc, OSError)
                else f"{type(exc).__name__}: {exc}")
        return JSONResponse({"error": f"internal error, nothing changed: {what}"[:500], "field": None},
                            status_code=500)


def _version() -> str:
    try:
        return metadata.version("placement")
    except metadata.PackageNotFoundError:
        return "unknown"
