"""Request bodies: strict JSON in, checked request models out, every fault a
:class:`Rejected` naming its field.

Python's ``json`` accepts ``NaN`` and ``Infinity`` and keeps the last of two equal keys;
:func:`loads` refuses both (400, naming where), and so does every other parser of the
project (:mod:`placement.model.strict_json`). The envelopes are pydantic models in strict
mode (no ``"3"`` for 3, no ``true`` for 1, no unknown fields: 422), which also give the
OpenAPI schemas; the job and machine inside are read by the instance format's own readers
(``Job.from_dict``), so a job is refused here exactly as in an instance file, naming its
path (``job.work_batches``).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from placement.model import limits
from placement.model.instance import Job
from placement.model.strict_json import Fields, FileFormatError, InstanceError, JsonFault, join, parse_strict, string, vector
from placement.model.topology import Machine
from placement.serve.errors import Rejected

__all__ = ["ErrorBody", "MachineBody", "ProgressBody", "ReviseBody", "StepBody", "SubmitBody", "job", "machine",
           "openapi", "parse"]

M = TypeVar("M", bound=BaseModel)


def _text(value: str) -> str:
    string(value, "", FileFormatError)   # non-empty, no control characters
    return value


def _gbps(value: float) -> float:
    reason = limits.GBPS.check(value, positive=True)
    if reason:
        raise ValueError(reason)
    return value


def _batches(value: float) -> float:
    """A count of mini-batches within the instance format's bound of ``work_batches``."""
    if value > limits.NUMBERS["work_batches"].high:
        raise ValueError(f"must be <= {limits.NUMBERS['work_batches'].high:g} (the bound of work_batches)")
    return value


#: the longest job or machine id: a DNS subdomain's, Kubernetes' longest object name (an id
#: also travels in URLs, and a pod label, which the extender reads, holds at most 63)
MAX_ID = 253


Text = Annotated[str, AfterValidator(_text)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class SubmitBody(_Body):
    """``POST /jobs``."""

    job: dict[str, Any] = Field(description="the job in the instance format (docs/model.md); `arrival` may be "
                                "left out (the next slot), and `work_batches` below information oracle")
    estimate: Annotated[float, Field(gt=0), AfterValidator(_batches)] | None = Field(None, description="a user's estimate of the "
                                                           "job's total batches (information estimate)")
    label: Text | None = Field(None, description="the job's class: model, user, queue (information estimate)")


class ReviseBody(_Body):
    """``PUT /jobs/{id}``."""

    job: dict[str, Any] = Field(description="the job's new description; `id` and `arrival` may be left out")


class ProgressBody(_Body):
    """``POST /jobs/{id}/progress``: ``done``, ``finished`` or both."""

    done: Annotated[float, Field(ge=0), AfterValidator(_batches)] | None = Field(
        None, description="batches completed so far, in all (it may go down: a job restarted from an older checkpoint)")
    finished: bool = Field(False, description="true: the job completed (it leaves the scheduler)")


class MachineBody(_Body):
    """``POST /machines``."""

    machine: dict[str, Any] = Field(description='{"id", "capacity", "local_gbps"} as in a topology')
    parent_switch: Text = Field(description="the switch it hangs below (GET /cluster)")
    gbps: Annotated[float, Field(gt=0), AfterValidator(_gbps)] = Field(description="its link to the switch")


class StepBody(_Body):
    """``POST /step``; an empty body is the next slot."""

    t: Annotated[int, Field(ge=0)] | None = Field(None, description="the slot to decide (default: the next)")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: str
    field: str | None


def openapi(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """The ``openapi_extra`` of a route that reads ``model`` itself (through :func:`parse`)."""
    return {"requestBody": {"required": required,
                            "content": {"application/json": {"schema": model.model_json_schema()}}}}


def parse(raw: bytes, content_type: str | None, model: type[M], *, empty_ok: bool = False) -> M:
    """The body ``raw`` as ``model``: 415 unless JSON, 400 unless strict JSON, 422 unless the
    model's fields (module docstring). ``empty_ok``: no body at all is the model's defaults."""
    if not raw.strip() and empty_ok:
        _json_type(content_type)   # even empty: a cross-site page cannot send this header without CORS
        return model()
    value = json_body(raw, content_type)
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ""
        for key in error["loc"]:
            where = join(where, key)
        raise Rejected(422, f"{where}: {_message(error, model)}" if where else _message(error, model),
                       where or None) from None


def json_body(raw: bytes, content_type: str | None) -> Any:
    """The body as strict JSON (:func:`loads`): 415 unless its Content-Type is JSON."""
    _json_type(content_type)
    return loads(raw)


def _json_type(content_type: str | None) -> None:
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise Rejected(415, f"send the body as JSON (Content-Type: application/json), got "
                       f"{(content_type or 'no Content-Type')[:60]!r}")


def _message(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown field (allowed: {', '.join(model.model_fields)})"
    if kind == "missing":
        return "missing required field"
    if kind == "model_type":
        return "the body must be a JSON object"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    return str(error["msg"])


def loads(raw: bytes) -> Any:
    """Strict JSON: UTF-8, no NaN or Infinity, no key twice in one object (400 naming where)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(400, f"the body is not UTF-8 text (byte {exc.start})") from None
    try:
        return parse_strict(text, finite=True)
    except json.JSONDecodeError as exc:
        raise Rejected(400, f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Rejected(400, "the body is not valid JSON: nested too deeply") from None
    except JsonFault as exc:
        raise Rejected(400, f"{exc.path or 'the body'}: {exc.reason}", exc.path or None) from None


def job(raw: Mapping[str, Any], information: str, *, estimate: float | None = None,
        job_id: str | None = None) -> tuple[Job, bool]:
    """The ``job`` of a body as a :class:`Job`, and whether it gave its arrival slot. Left
    out: ``arrival`` (0 here; the service sets it), ``id`` when ``job_id`` (a revise: the
    path's) is given, ``work_batches`` below information ``oracle`` (the estimate, else 1: the
    scheduler never reads it there, placement.online.knowledge.submitted)."""
    value = dict(raw)
    arrival_given = "arrival" in value
    value.setdefault("arrival", 0)
    if job_id is not None:
        value.setdefault("id", job_id)
    if information != "oracle":
        value.setdefault("work_batches", estimate or 1.0)
    try:
        parsed = Job.from_dict(value, "job")
    except FileFormatError as exc:
        raise Rejected(422, str(exc), exc.path) from None
    if len(parsed.id) > MAX_ID:
        raise Rejected(422, f"job.id: at most {MAX_ID} characters, got {len(parsed.id)}", "job.id")
    if job_id is not None and parsed.id != job_id:
        raise Rejected(422, f"job.id: {parsed.id!r} is not the job of the path ({job_id!r})", "job.id")
    return parsed, arrival_given


def machine(raw: Mapping[str, Any]) -> Machine:
    """The ``machine`` of a body, read as a topology's machine is."""
    try:
        f = Fields(raw, "machine", InstanceError, ("id", "capacity", "local_gbps"), ("gpu_type",))
        if len(f.string("id")) > MAX_ID:
            raise Rejected(422, f"machine.id: at most {MAX_ID} characters", "machine.id")
        if f.has("gpu_type") and len(f.string("gpu_type")) > MAX_ID:
            raise Rejected(422, f"machine.gpu_type: at most {MAX_ID} characters", "machine.gpu_type")
        return Machine(f.string("id"), vector(raw["capacity"], "machine.capacity", InstanceError),
                       f.number("local_gbps", positive=True),
                       f.string("gpu_type") if f.has("gpu_type") else None)
    except FileFormatError as exc:
        raise Rejected(422, str(exc), exc.path) from None
