"""Logpush jobs' cursors in a shared log stream, kept in the configuration database so that whichever delivery
process owns a job next reads on from where the last one confirmed an upload. A save is fenced by the job's lease
(``edgeplane.logs.job_leases``): in the transaction that writes the cursor, the owner's lease is checked, and locked
against a change of owner until the write commits."""

from __future__ import annotations

from sqlalchemy import delete, select, update

from edgeplane.logs.job_leases import JobLeases, LeaseLostError
from edgeplane.store.conflicting_insert import conflicting_insert
from edgeplane.store.database import Database
from edgeplane.store.database_clock import database_seconds
from edgeplane.store.delivery_models import JobCursor, JobLease


class DatabaseCursors:
    """The cursors of the jobs ``leases`` holds (the log bus's ``SharedCursors``). Methods block on the database:
    an asyncio caller runs them in a thread."""

    def __init__(self, database: Database, leases: JobLeases) -> None:
        self.database = database
        self.leases = leases

    def load(self, dataset: str, job_id: int) -> int | None:
        """The job's saved position in ``dataset``, or None when it has none."""
        with self.database.session() as session:
            return session.scalar(
                select(JobCursor.position).where(JobCursor.dataset == dataset, JobCursor.job_id == job_id)
            )

    def save(self, dataset: str, job_id: int, position: int) -> None:
        """Saves the job's position, if this owner still holds the job's unexpired lease with the token it won it
        with. Raises ``LeaseLostError`` otherwise (the cursor is left as it was), ``ValueError`` for a negative
        position."""
        if position < 0:
            raise ValueError(f"a cursor's position is not negative: {position}")
        token = self.leases.token(job_id)
        if token is None:
            raise LeaseLostError(job_id)
        with self.database.session() as session:
            # Rewriting the token to itself locks the lease's row (PostgreSQL; SQLite's writers take turns) until
            # the cursor is written: a new owner takes the job before or after this save, never during it.
            fenced = session.scalar(
                update(JobLease)
                .where(
                    JobLease.job_id == job_id,
                    JobLease.owner == self.leases.owner,
                    JobLease.token == token,
                    JobLease.expires > database_seconds(),
                )
                .values(token=JobLease.token)
                .returning(JobLease.job_id)
            )
            if fenced is None:
                raise LeaseLostError(job_id)
            session.execute(
                conflicting_insert(session, JobCursor)
                .values(dataset=dataset, job_id=job_id, position=position)
                .on_conflict_do_update(index_elements=["dataset", "job_id"], set_={"position": position})
            )

    def delete(self, dataset: str, job_id: int) -> None:
        """Forgets the job's position (a deleted job)."""
        with self.database.session() as session:
            session.execute(delete(JobCursor).where(JobCursor.dataset == dataset, JobCursor.job_id == job_id))
