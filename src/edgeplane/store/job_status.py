"""Delivery's report on each Logpush job, kept on the job: ``last_complete``, ``last_error``, ``error_message``.
These are not configuration: writing them does not change the configuration version."""

from __future__ import annotations

from datetime import datetime

from edgeplane.store.database import Database
from edgeplane.store.models import LogpushJob


class DatabaseJobStatus:
    """Records job outcomes in the configuration database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def completed(self, job_id: int, when: datetime) -> None:
        """A batch was confirmed by the destination: the job is healthy again."""
        with self.database.session() as session:
            job = session.get(LogpushJob, job_id)
            if job is not None:
                job.last_complete = when
                job.error_message = None

    def failed(self, job_id: int, when: datetime, message: str) -> None:
        """An upload failed (it will be retried)."""
        with self.database.session() as session:
            job = session.get(LogpushJob, job_id)
            if job is not None:
                job.last_error = when
                job.error_message = message[:1000]
