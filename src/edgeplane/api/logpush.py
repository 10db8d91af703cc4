"""Logpush jobs (seed 001) under ``/zones/{zone_id}/logpush`` and ``/accounts/{account_id}/logpush``: jobs
(list, create, get, update, delete), dataset fields and jobs, the ownership challenge, and the validation helpers.

Everything a job holds is checked before it is stored: the dataset, the filter (against the dataset's fields and
the filter language's limits, with the offending path in the error), ``logpull_options``/``output_options``
(either derives the other), the destination, and the ranges of the upload limits. Account-level jobs read the logs
of every zone of the account.

A destination is admitted only when the operator's ``DestinationPolicy`` allows what its conf names (addresses,
the file root), and, when it would be written with the platform's own authority (a directory on this machine, an S3
bucket reached with the platform's AWS credentials), only with the ``ownership_challenge`` that
``POST .../logpush/ownership`` wrote there: proof that whoever creates the job can read the destination. The routes
that write to or look at a destination need write access to the scope, checked before anything is probed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from edgeplane.api.endpoint import ApiRequest, ApiResult, reject_unknown, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.scope import Scope, request_scope
from edgeplane.api.timestamps import rfc3339
from edgeplane.logs.datasets import DATASETS, Dataset, load_dataset
from edgeplane.logs.destination_conf import (
    Destination,
    FileDestination,
    S3Destination,
    expand_date,
    parse_destination_conf,
)
from edgeplane.logs.destinations import DestinationFailure, DestinationPolicy, open_destination
from edgeplane.logs.errors import DestinationError, FilterError, OutputOptionsError, UnknownDatasetError
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.output_options import (
    logpull_options_from_output,
    output_options_from_logpull,
    parse_logpull_options,
    parse_output_options,
)
from edgeplane.logs.record_format import compile_formatter
from edgeplane.store.models import Account, LogpushJob

MAX_JOBS_PER_ZONE = 4  # the real product's limit
MAX_JOBS_PER_ACCOUNT = 4  # account-level jobs (each reads every zone of the account), on top of the zones' own
_NAME = re.compile(r"[a-zA-Z0-9.-]*")
_JOB_MEMBERS = frozenset(
    {
        "dataset",
        "enabled",
        "name",
        "destination_conf",
        "logpull_options",
        "output_options",
        "filter",
        "frequency",
        "kind",
        "max_upload_bytes",
        "max_upload_records",
        "max_upload_interval_seconds",
        "ownership_challenge",
        "filter_attack_traffic",
    }
)
_READ_ONLY = frozenset({"id", "last_complete", "last_error", "error_message"})


def _jobs_query(scope: Scope) -> Any:
    query = select(LogpushJob)
    if scope.zone_id is not None:
        return query.where(LogpushJob.zone_id == scope.zone_id)
    return query.where(LogpushJob.account_id == scope.account_id, LogpushJob.zone_id.is_(None))


def job_json(job: LogpushJob) -> dict[str, Any]:
    """A job in the v4 shape; the filter is echoed as stored."""
    return {
        "id": job.id,
        "dataset": job.dataset,
        "enabled": job.enabled,
        "name": job.name or None,
        "destination_conf": job.destination_conf,
        "logpull_options": job.logpull_options,
        "output_options": job.output_options,
        "filter": job.filter,
        "frequency": job.frequency,
        "kind": job.kind,
        "max_upload_bytes": job.max_upload_bytes,
        "max_upload_records": job.max_upload_records,
        "max_upload_interval_seconds": job.max_upload_interval_seconds,
        "last_complete": rfc3339(job.last_complete),
        "last_error": rfc3339(job.last_error),
        "error_message": job.error_message,
    }


def _job(request: ApiRequest, scope: Scope) -> LogpushJob:
    raw = request.path_params["job_id"]
    job = request.session.get(LogpushJob, int(raw)) if raw.isdigit() and len(raw) < 19 else None
    if job is None or job.zone_id != scope.zone_id or job.account_id != scope.account_id:
        raise not_found(request.path)
    return job


def _dataset(name: Any) -> Dataset:
    if not isinstance(name, str):
        raise bad_request(f"dataset must be one of {', '.join(DATASETS)}", pointer="/dataset")
    try:
        return load_dataset(name)
    except UnknownDatasetError:
        raise bad_request(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}", pointer="/dataset") from None


def _int_in(body: dict[str, Any], member: str, default: int, low: int, high: int) -> int:
    value = body.get(member)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or (value != 0 and not low <= value <= high):
        raise bad_request(f"{member} must be 0 or between {low} and {high}", pointer=f"/{member}")
    return value


def _apply(job: LogpushJob, body: dict[str, Any], dataset: Dataset, *, creating: bool) -> None:
    """Checks the members in ``body`` and sets them on ``job``, all but ``destination_conf`` (``Logpush`` sets it)."""
    if "name" in body or creating:
        name = body.get("name") or ""
        if not isinstance(name, str) or len(name) > 512 or not _NAME.fullmatch(name):
            raise bad_request("name may hold only letters, digits, dots and dashes (at most 512)", pointer="/name")
        job.name = name
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise bad_request("enabled must be true or false", pointer="/enabled")
        job.enabled = body["enabled"]
    elif creating:
        job.enabled = False
    if "frequency" in body or creating:
        frequency = body.get("frequency") or "high"
        if frequency not in ("high", "low"):
            raise bad_request("frequency must be high or low", pointer="/frequency")
        job.frequency = frequency
    if "kind" in body or creating:
        kind = body.get("kind") or ""
        if kind not in ("", "edge"):
            raise bad_request('kind must be "" or "edge"', pointer="/kind")
        job.kind = kind
    if "filter" in body:
        text = body["filter"]
        if text is not None and text != "":
            if not isinstance(text, str):
                raise bad_request("filter must be a string holding JSON", pointer="/filter")
            try:
                parse_filter(text, dataset)
            except FilterError as error:
                raise bad_request(f"invalid filter: {error}", code=1004, pointer="/filter") from None
            job.filter = text
        else:
            job.filter = None
    _apply_options(job, body, dataset, creating=creating)
    if "max_upload_bytes" in body or creating:
        job.max_upload_bytes = _int_in(body, "max_upload_bytes", 0, 5_000_000, 1_000_000_000)
    if "max_upload_records" in body or creating:
        job.max_upload_records = _int_in(body, "max_upload_records", 100_000, 1_000, 1_000_000)
    if "max_upload_interval_seconds" in body or creating:
        job.max_upload_interval_seconds = _int_in(body, "max_upload_interval_seconds", 30, 30, 300)


def _apply_options(job: LogpushJob, body: dict[str, Any], dataset: Dataset, *, creating: bool) -> None:
    has_logpull = body.get("logpull_options") not in (None, "")
    has_output = body.get("output_options") is not None
    try:
        if has_output:
            output = parse_output_options(body["output_options"], dataset)
            job.output_options = output.to_json()
            if has_logpull:
                if not isinstance(body["logpull_options"], str):
                    raise OutputOptionsError("logpull_options", "must be a string")
                job.logpull_options = parse_logpull_options(body["logpull_options"], dataset).to_query()
            else:
                job.logpull_options = logpull_options_from_output(output).to_query()
        elif has_logpull:
            if not isinstance(body["logpull_options"], str):
                raise OutputOptionsError("logpull_options", "must be a string")
            logpull = parse_logpull_options(body["logpull_options"], dataset)
            job.logpull_options = logpull.to_query()
            job.output_options = output_options_from_logpull(logpull).to_json()
        elif creating or "output_options" in body or "logpull_options" in body:
            output = parse_output_options(None, dataset)
            job.output_options = output.to_json()
            job.logpull_options = logpull_options_from_output(output).to_query()
        if job.output_options is not None:
            # The formatter refuses what it cannot write (a record_template beyond {{.Field}} placeholders).
            compile_formatter(parse_output_options(job.output_options, dataset), dataset)
            if job.output_options.get("merge_subrequests") and job.zone_id is None:
                raise OutputOptionsError("output_options.merge_subrequests", "is not supported for account jobs")
    except OutputOptionsError as error:
        member = error.member.split(".", 1)[0] if error.member else "output_options"
        raise bad_request(f"invalid {error}", code=1003, pointer="/" + member.replace(".", "/")) from None


def list_jobs(request: ApiRequest) -> ApiResult:
    """``GET .../logpush/jobs``."""
    scope = request_scope(request)
    jobs = request.session.scalars(_jobs_query(scope).order_by(LogpushJob.id)).all()
    return ApiResult([job_json(job) for job in jobs])


def dataset_jobs(request: ApiRequest) -> ApiResult:
    """``GET .../logpush/datasets/{dataset}/jobs``."""
    scope = request_scope(request)
    dataset = _dataset(request.path_params["dataset"])
    jobs = request.session.scalars(
        _jobs_query(scope).where(LogpushJob.dataset == dataset.name).order_by(LogpushJob.id)
    ).all()
    return ApiResult([job_json(job) for job in jobs])


def dataset_fields(request: ApiRequest) -> ApiResult:
    """``GET .../logpush/datasets/{dataset}/fields``: field name → description."""
    request_scope(request)
    dataset = _dataset(request.path_params["dataset"])
    return ApiResult({field.name: field.description for field in dataset.fields})


def get_job(request: ApiRequest) -> ApiResult:
    """``GET .../logpush/jobs/{job_id}``."""
    return ApiResult(job_json(_job(request, request_scope(request))))


def delete_job(request: ApiRequest) -> ApiResult:
    """``DELETE .../logpush/jobs/{job_id}``: answers ``{id}``."""
    scope = request_scope(request, write=True)
    job = _job(request, scope)
    request.session.delete(job)
    return ApiResult({"id": job.id}, changed=True)


# -- destinations -----------------------------------------------------------------------------------------------


def _parse(body: Any) -> tuple[str, Destination]:
    conf = require_object(body).get("destination_conf")
    if not isinstance(conf, str):
        raise bad_request("destination_conf must be a string", code=1002, pointer="/destination_conf")
    try:
        return conf, parse_destination_conf(conf)
    except DestinationError as error:
        raise bad_request(str(error), code=1002, pointer="/destination_conf") from None


def challenge_token(secret: bytes, scope: Scope, conf: str) -> str:
    """The ownership challenge for a destination: derived, so that validation needs nothing stored."""
    message = f"{scope.zone_id or ''}|{scope.account_id}|{conf}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def needs_ownership_challenge(destination: Destination) -> bool:
    """Whether a job needs the destination's ownership challenge: one written with the platform's own authority (a
    directory on this machine, or an S3 bucket reached with the platform's AWS credentials). An S3 store given with
    the tenant's own keys, and an HTTPS endpoint (which is sent only what the job selects, and only to an address
    the policy allows), need none, as on the real API."""
    if isinstance(destination, FileDestination):
        return True
    return isinstance(destination, S3Destination) and destination.secret_access_key is None


def _challenge_name(token: str) -> str:
    return f"ownership-challenge-{token[:16]}.txt"


class Logpush:
    """The Logpush routes that judge a destination: with the installation ``secret`` (ownership challenges) and the
    operator's destination ``policy``."""

    def __init__(self, secret: bytes, policy: DestinationPolicy) -> None:
        self.secret = secret
        self.policy = policy

    def create_job(self, request: ApiRequest) -> ApiResult:
        """``POST .../logpush/jobs``."""
        scope = request_scope(request, write=True)
        body = require_object(request.body)
        reject_unknown(body, _JOB_MEMBERS)
        dataset = _dataset(body.get("dataset") or "http_requests")
        _check_job_limit(request, scope)
        job = LogpushJob(zone_id=scope.zone_id, account_id=scope.account_id, dataset=dataset.name)
        job.destination_conf = self._job_destination(scope, body)
        _apply(job, body, dataset, creating=True)
        request.session.add(job)
        request.session.flush()
        job_id, dataset_name = job.id, job.dataset
        return ApiResult(
            job_json(job), changed=True, after_commit=lambda plane: plane.on_job_created(dataset_name, job_id)
        )

    def update_job(self, request: ApiRequest) -> ApiResult:
        """``PUT .../logpush/jobs/{job_id}``: any member but ``dataset`` (fixed at creation). A new
        ``destination_conf`` is checked as at creation (with its ownership challenge); enabling a job checks its
        destination against the current policy."""
        scope = request_scope(request, write=True)
        job = _job(request, scope)
        body = require_object(request.body)
        reject_unknown(body, _JOB_MEMBERS | _READ_ONLY)
        if "dataset" in body and body["dataset"] not in (None, job.dataset):
            raise bad_request("dataset cannot be changed after the job is created", code=1006, pointer="/dataset")
        if "destination_conf" in body and body["destination_conf"] != job.destination_conf:
            job.destination_conf = self._job_destination(scope, body)
        elif body.get("enabled") is True:  # the policy may have changed since the job was stored
            _, stored = _parse({"destination_conf": job.destination_conf})
            self._admit(stored)
        changes = {k: v for k, v in body.items() if k not in _READ_ONLY and k != "destination_conf"}
        _apply(job, changes, load_dataset(job.dataset), creating=False)
        return ApiResult(job_json(job), changed=True)

    def request_challenge(self, request: ApiRequest) -> ApiResult:
        """``POST .../logpush/ownership``: writes the challenge file where the destination's batches go; answers its
        name (a path, an object key, or for an HTTPS endpoint the name it would have)."""
        scope = request_scope(request, write=True)
        conf, destination = _parse(request.body)
        self._admit(destination)
        token = challenge_token(self.secret, scope, conf)
        filename = _challenge_name(token)
        uploader = open_destination(destination, policy=self.policy)

        async def write() -> None:
            try:
                await uploader.write_challenge(filename, token + "\n")
            finally:
                await uploader.close()

        try:
            asyncio.run(write())  # this handler runs in a worker thread, outside the server's loop
        except DestinationFailure as failure:
            raise bad_request(f"cannot write the ownership challenge: {failure}", code=1002) from None
        return ApiResult({"filename": _written_as(destination, filename), "message": "", "valid": True})

    def validate_challenge(self, request: ApiRequest) -> ApiResult:
        """``POST .../logpush/ownership/validate`` with ``destination_conf`` and ``ownership_challenge``."""
        scope = request_scope(request, write=True)
        conf, _ = _parse(request.body)
        return ApiResult({"valid": self._challenge_valid(scope, conf, request.body.get("ownership_challenge"))})

    def validate_destination(self, request: ApiRequest) -> ApiResult:
        """``POST .../logpush/validate/destination``: the conf is well formed and the policy allows it, its host
        names resolved now. Nothing is written or connected to."""
        request_scope(request, write=True)
        body = require_object(request.body)
        try:
            self.policy.check_resolved(parse_destination_conf(body.get("destination_conf")))  # type: ignore[arg-type]
        except DestinationError as error:
            return ApiResult({"valid": False, "message": str(error)})
        return ApiResult({"valid": True, "message": ""})

    def _job_destination(self, scope: Scope, body: dict[str, Any]) -> str:
        conf, destination = _parse(body)
        self._admit(destination)
        if needs_ownership_challenge(destination) and not self._challenge_valid(
            scope, conf, body.get("ownership_challenge")
        ):
            raise bad_request(
                "missing or incorrect ownership challenge: request one with POST .../logpush/ownership for this "
                "destination_conf and give the token written there as ownership_challenge",
                code=1002,
                pointer="/ownership_challenge",
            )
        return conf

    def _admit(self, destination: Destination) -> None:
        try:
            self.policy.admit(destination)
        except DestinationError as error:
            raise bad_request(str(error), code=1002, pointer="/destination_conf") from None

    def _challenge_valid(self, scope: Scope, conf: str, given: Any) -> bool:
        expected = challenge_token(self.secret, scope, conf)
        return isinstance(given, str) and hmac.compare_digest(given.strip().encode(), expected.encode())


def _written_as(destination: Destination, filename: str) -> str:
    today = datetime.now(UTC)
    if isinstance(destination, FileDestination):
        return str(Path(expand_date(destination.directory, today)) / filename)
    if isinstance(destination, S3Destination):
        prefix = expand_date(destination.prefix, today).strip("/")
        return f"{prefix}/{filename}" if prefix else filename
    return filename


def _check_job_limit(request: ApiRequest, scope: Scope) -> None:
    # The account's row is locked first, so that two creations at once cannot both pass the count.
    request.session.execute(select(Account.id).where(Account.id == scope.account_id).with_for_update())
    if scope.zone_id is not None:
        where, limit, what = LogpushJob.zone_id == scope.zone_id, MAX_JOBS_PER_ZONE, "zone"
    else:
        where = (LogpushJob.account_id == scope.account_id) & LogpushJob.zone_id.is_(None)
        limit, what = MAX_JOBS_PER_ACCOUNT, "account"
    count = request.session.scalar(select(func.count()).select_from(LogpushJob).where(where))
    if (count or 0) >= limit:
        raise bad_request(f"creating a job would exceed the limit of {limit} Logpush jobs for this {what}", code=1005)


def destination_exists(request: ApiRequest) -> ApiResult:
    """``POST .../logpush/validate/destination/exists``: whether a job of this scope already pushes there."""
    scope = request_scope(request, write=True)
    conf, _ = _parse(request.body)
    found = request.session.scalars(_jobs_query(scope).where(LogpushJob.destination_conf == conf)).first()
    return ApiResult({"exists": found is not None})


def validate_origin(request: ApiRequest) -> ApiResult:
    """``POST .../logpush/validate/origin`` with ``logpull_options`` (and optional ``dataset``)."""
    request_scope(request)
    body = require_object(request.body)
    dataset = _dataset(body.get("dataset") or "http_requests")
    options = body.get("logpull_options")
    if not isinstance(options, str):
        return ApiResult({"valid": False, "message": "logpull_options must be a string"})
    try:
        parse_logpull_options(options, dataset)
    except OutputOptionsError as error:
        return ApiResult({"valid": False, "message": str(error)})
    return ApiResult({"valid": True, "message": ""})


# -- Instant Logs -------------------------------------------------------------------------------------------------

INSTANT_LOGS_UNSUPPORTED = 1010


def list_edge_jobs(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/logpush/edge/jobs``: the zone's Instant Logs sessions, always none (edgeplane streams
    no Instant Logs; ``edgeplane logs tail`` follows the records on the machine)."""
    request_scope(request)
    return ApiResult([])


def create_edge_job(request: ApiRequest) -> ApiResult:
    """``POST /zones/{zone_id}/logpush/edge/jobs``: refused (400, code 1010): edgeplane has no WebSocket stream of
    records to hand out; a Logpush job or ``edgeplane logs tail`` gives the same records."""
    request_scope(request, write=True)
    raise bad_request(
        "Instant Logs are not supported by edgeplane: create a Logpush job, or follow the records with "
        "`edgeplane logs tail --filter ...` on the machine",
        code=INSTANT_LOGS_UNSUPPORTED,
    )
