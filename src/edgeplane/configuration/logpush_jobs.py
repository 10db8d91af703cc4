"""The Logpush job definitions as the configuration holds them: typed values read from the database, for the
delivery process to run and for the edge worker's snapshot to find which zones' attack scores are logged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.store.models import LogpushJob


@dataclass(frozen=True, slots=True, kw_only=True)
class LogpushJobDefinition:
    """A stored Logpush job, as delivery runs it: the records it reads (``dataset``, of its zone or, with no zone, of
    every zone of its account; those ``filter`` keeps), how it writes them (``output_options``, or the older
    ``logpull_options``), where (``destination_conf``) and in what batches (``max_upload_*``). Defaults are the
    database's. Two definitions are equal when every member is: a job whose definition changed is run again."""

    id: int
    dataset: str
    destination_conf: str
    zone_id: str | None = None
    account_id: str | None = None
    enabled: bool = False
    filter: str | None = None
    output_options: dict[str, Any] | None = None
    logpull_options: str | None = None
    max_upload_bytes: int = 0
    max_upload_records: int = 100_000
    max_upload_interval_seconds: int = 30


def read_logpush_jobs(session: Session) -> tuple[LogpushJobDefinition, ...]:
    """Every stored job, enabled or not, in the order of their ids."""
    return tuple(
        LogpushJobDefinition(
            id=job.id,
            zone_id=job.zone_id,
            account_id=job.account_id,
            dataset=job.dataset,
            enabled=job.enabled,
            destination_conf=job.destination_conf,
            filter=job.filter,
            output_options=job.output_options,
            logpull_options=job.logpull_options,
            max_upload_bytes=job.max_upload_bytes,
            max_upload_records=job.max_upload_records,
            max_upload_interval_seconds=job.max_upload_interval_seconds,
        )
        for job in session.scalars(select(LogpushJob).order_by(LogpushJob.id)).all()
    )
