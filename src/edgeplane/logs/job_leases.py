"""Leases on Logpush jobs, so that a group of delivery processes on any machines shares the jobs: each job is
delivered by one process at a time, its owner, and handed over when the owner stops renewing its lease.

A lease lasts ``ttl_seconds`` on the database's clock (``edgeplane.store.database_clock``): expiry does not depend on
the delivery machines' clocks agreeing. Each change of owner makes the lease's fencing token grow; a cursor is saved
only by the owner holding the current token (``edgeplane.logs.database_cursors``), so an owner that was presumed
dead, and wakes up, can neither move a cursor back nor forward.

Each process claims a fair share of the jobs, ``ceil(jobs / live members)``, and gives back what it holds beyond it
when another member has fewer than ``jobs // live members`` (a process that joins gets work). Every step is a short
transaction of conditional UPDATEs and INSERTs that do nothing on a conflict, safe under concurrency: on PostgreSQL
a row is changed by one transaction at a time and the condition is evaluated again on the row as it was committed,
on SQLite writers take turns; two owners never both hold a job. See docs/delivery-leases.md.

What a claim returns and what ``token`` answers agree: each lease held is trusted, by this process's monotonic clock,
until one ttl after the transaction that renewed or took it began (never later than the database's expiry). A claim
slow enough that a lease it holds has less than a third of the ttl left (the keeper claims every third) renews the
leases once more before it returns, and returns only the leases still trusted then: a stalled machine gets fewer
jobs, never a job it cannot vouch for.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from prometheus_client import Gauge
from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from edgeplane.store.conflicting_insert import conflicting_insert
from edgeplane.store.database import Database
from edgeplane.store.database_clock import database_seconds
from edgeplane.store.delivery_models import DeliveryMember, JobLease

# A member whose heartbeat is older than this is forgotten (it crashed: a clean stop removes its row at once).
_FORGET_MEMBER_SECONDS = 86_400.0


JOBS_HELD = Gauge(
    "edgeplane_logpush_jobs_held",
    "Logpush jobs the delivery processes of this node hold a lease on.",
    multiprocess_mode="livesum",
)


class _Held(NamedTuple):
    """A lease this owner holds: its fencing token, and the clock reading after which it is no longer trusted."""

    token: int
    valid_until: float


class LeaseLostError(Exception):
    """This delivery process no longer holds a job's lease (another owner took it over, or it expired): the job's
    work here ends, and its cursor stays where the last save under a valid lease put it."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"the lease of Logpush job {job_id} was lost")


def default_owner() -> str:
    """An owner id unique to this process: the host, the process id and a random part (a restarted process, even
    with the same id, is a new owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class JobLeases:
    """One delivery process's leases on Logpush jobs, as ``owner``. Methods block on the database: an asyncio caller
    runs them in a thread. ``holds`` and ``token`` answer from what the last ``claim`` won, without asking.
    ``clock`` is the monotonic clock leases are trusted by (a test passes one it controls)."""

    def __init__(
        self,
        database: Database,
        owner: str,
        *,
        ttl_seconds: float = 10.0,
        host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises ``ValueError`` for an empty or over-long owner, or a ``ttl_seconds`` that is not positive."""
        if not owner or len(owner) > 255:
            raise ValueError("a lease owner is a name of 1 to 255 characters")
        if not (math.isfinite(ttl_seconds) and ttl_seconds > 0):
            raise ValueError(f"ttl_seconds must be a positive number of seconds, not {ttl_seconds!r}")
        self.database = database
        self.owner = owner
        self.ttl_seconds = float(ttl_seconds)
        self.host = (host or socket.gethostname())[:255]
        self.clock = clock
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}  # job id -> its lease, as of the last claim

    def heartbeat(self) -> None:
        """Says this owner is alive (a member counted in the fair share) for ``ttl_seconds``."""
        with self.database.session() as session:
            self._beat(session)

    def claim(self, job_ids: Iterable[int]) -> frozenset[int]:
        """Beats, renews the leases this owner holds among ``job_ids`` (the enabled jobs) and gives back those of
        other jobs, then takes free or expired leases up to its fair share, or gives back what it holds beyond the
        share when another member has fewer. Returns the jobs it holds, each of which ``token`` answers for when the
        claim returns (a slow claim renews once more first, and leaves out what it could not renew). Raises the
        database's errors (nothing is then known to be held once ``ttl_seconds`` have passed since the last claim
        that succeeded)."""
        jobs = sorted({int(job_id) for job_id in job_ids})
        started = self.clock()
        now = database_seconds()
        # What is given back stops being held here first: this owner never holds a job another may have taken.
        self._forget(set(self._held) - set(jobs))
        with self.database.session() as session:
            self._beat(session)
            mine = JobLease.owner == self.owner
            session.execute(update(JobLease).where(mine, JobLease.job_id.not_in(jobs)).values(owner=None, expires=0.0))
            session.execute(
                update(JobLease)
                .where(mine, JobLease.expires > now, JobLease.job_id.in_(jobs))
                .values(expires=now + self.ttl_seconds)
            )
            held = {
                job_id: _Held(token, started + self.ttl_seconds) for job_id, token in self._read_held(session).items()
            }
            live = session.scalars(
                select(DeliveryMember.owner).where(DeliveryMember.heartbeat > now - self.ttl_seconds)
            ).all()
            taken = {
                job_id: owner
                for job_id, owner in session.execute(
                    select(JobLease.job_id, JobLease.owner).where(
                        JobLease.owner.is_not(None), JobLease.expires > now, JobLease.job_id.in_(jobs)
                    )
                )
            }
            counts = dict.fromkeys(live, 0) | {self.owner: len(held)}
            for owner in taken.values():
                if owner is not None and owner != self.owner and owner in counts:
                    counts[owner] += 1
            share = math.ceil(len(jobs) / len(counts)) if jobs else 0
            low = len(jobs) // len(counts)
            starving = any(count < low for owner, count in counts.items() if owner != self.owner)
            keep = low if starving else share
            if len(held) > keep:
                given_back = sorted(held)[keep:]
                self._forget(given_back)
                session.execute(
                    update(JobLease).where(mine, JobLease.job_id.in_(given_back)).values(owner=None, expires=0.0)
                )
                for job_id in given_back:
                    del held[job_id]
        wanted = keep - len(held)
        for job_id in jobs:
            if wanted <= 0:
                break
            if job_id in held or job_id in taken:
                continue
            taking = self.clock()
            token = self._take(job_id)
            if token is not None:
                held[job_id] = _Held(token, taking + self.ttl_seconds)
                wanted -= 1
        if held and min(lease.valid_until for lease in held.values()) - self.clock() < self.ttl_seconds / 3:
            renewing = self.clock()
            renewed = self._renew(sorted(held))
            # A lease not renewed expired on the database's clock, or another owner has it now: it is left out.
            held = {
                job_id: _Held(lease.token, renewing + self.ttl_seconds)
                for job_id, lease in held.items()
                if job_id in renewed
            }
        with self._lock:
            trusted_at = self.clock()
            self._held = {job_id: lease for job_id, lease in held.items() if lease.valid_until > trusted_at}
            claimed = frozenset(self._held)
        JOBS_HELD.set(len(claimed))
        return claimed

    def holds(self, job_id: int) -> bool:
        """Whether the last claim won the job's lease and it has not run out since (by this process's monotonic
        clock, counted from before the transaction that renewed or took it: never later than the database's
        expiry)."""
        return self.token(job_id) is not None

    def token(self, job_id: int) -> int | None:
        """The fencing token of the job's lease, if this owner holds it (as ``holds`` says); None otherwise."""
        with self._lock:
            lease = self._held.get(job_id)
            if lease is None or self.clock() >= lease.valid_until:
                return None
            return lease.token

    def lost(self, job_id: int) -> None:
        """Records that the job's lease was found lost (a fenced save): not held until a claim wins it again."""
        self._forget([job_id])

    def _forget(self, job_ids: Iterable[int]) -> None:
        with self._lock:
            for job_id in job_ids:
                self._held.pop(job_id, None)

    def release_all(self) -> None:
        """Gives back every lease and leaves the members (a clean stop): the others take the jobs at their next
        claim, without waiting for the leases to expire."""
        with self._lock:
            self._held = {}
        with self.database.session() as session:
            session.execute(update(JobLease).where(JobLease.owner == self.owner).values(owner=None, expires=0.0))
            session.execute(delete(DeliveryMember).where(DeliveryMember.owner == self.owner))

    def _beat(self, session: Session) -> None:
        now = database_seconds()
        beat = update(DeliveryMember).where(DeliveryMember.owner == self.owner).values(heartbeat=now)
        if session.scalar(beat.returning(DeliveryMember.owner)) is None:
            session.execute(
                conflicting_insert(session, DeliveryMember)
                .values(owner=self.owner, host=self.host, started=now, heartbeat=now)
                .on_conflict_do_update(index_elements=["owner"], set_={"heartbeat": now})
            )
        session.execute(delete(DeliveryMember).where(DeliveryMember.heartbeat < now - _FORGET_MEMBER_SECONDS))

    def _read_held(self, session: Session) -> dict[int, int]:
        rows = session.execute(
            select(JobLease.job_id, JobLease.token).where(
                JobLease.owner == self.owner, JobLease.expires > database_seconds()
            )
        )
        return {job_id: token for job_id, token in rows}

    def _renew(self, job_ids: list[int]) -> set[int]:
        """Renews the owner's unexpired leases among ``job_ids``, in a transaction of its own; the jobs renewed."""
        now = database_seconds()
        with self.database.session() as session:
            renewed = session.scalars(
                update(JobLease)
                .where(JobLease.owner == self.owner, JobLease.expires > now, JobLease.job_id.in_(job_ids))
                .values(expires=now + self.ttl_seconds)
                .returning(JobLease.job_id)
            )
            return set(renewed)

    def _take(self, job_id: int) -> int | None:
        """Takes the job's lease if it is free or expired, in a transaction of its own; its new token, or None when
        another owner holds it."""
        now = database_seconds()
        with self.database.session() as session:
            token = session.scalar(
                update(JobLease)
                .where(JobLease.job_id == job_id, or_(JobLease.owner.is_(None), JobLease.expires <= now))
                .values(owner=self.owner, token=JobLease.token + 1, expires=now + self.ttl_seconds)
                .returning(JobLease.token)
            )
            if token is None:  # no lease yet, or one held: a lease is created by one owner only
                token = session.scalar(
                    conflicting_insert(session, JobLease)
                    .values(job_id=job_id, owner=self.owner, token=1, expires=now + self.ttl_seconds)
                    .on_conflict_do_nothing(index_elements=["job_id"])
                    .returning(JobLease.token)
                )
            return token
