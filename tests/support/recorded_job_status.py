"""A ``JobStatus`` (``edgeplane.logs.delivery``) that records what delivery reports of a job instead of writing it to
the database: the tests and benchmarks that run ``JobDelivery`` read its completions and failures."""

from __future__ import annotations

from datetime import datetime


class RecordedJobStatus:
    """The completed uploads counted, and each failure's message kept in order."""

    def __init__(self) -> None:
        self.completions = 0
        self.failures: list[str] = []

    def completed(self, job_id: int, when: datetime) -> None:
        self.completions += 1

    def failed(self, job_id: int, when: datetime, message: str) -> None:
        self.failures.append(message)
