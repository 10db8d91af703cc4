"""The records that let several delivery processes share the Logpush jobs: who is delivering (``DeliveryMember``),
which of them owns each job (``JobLease``), and where each job is in the shared log stream (``JobCursor``).

Times here are seconds since 1970 read from the database's clock (``edgeplane.store.database_clock``), never from
a delivery machine's: a lease expires when the database says so, whatever the machines' clocks say. A number, not a
timestamp column, because it compares and adds the same way in SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from edgeplane.store.models import Base


class DeliveryMember(Base):
    """A running delivery process: alive while its ``heartbeat`` is more recent than the lease time."""

    __tablename__ = "delivery_members"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    started: Mapped[float] = mapped_column(Double)
    heartbeat: Mapped[float] = mapped_column(Double, index=True)


class JobLease(Base):
    """Which delivery process delivers a Logpush job, until ``expires``. ``token`` grows each time the job changes
    hands (the fencing token): a cursor is saved only by the owner holding the current token. No owner: released.
    The row is kept when the job is released, so its token never starts again."""

    __tablename__ = "job_leases"

    job_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False
    )
    owner: Mapped[str | None] = mapped_column(String(255), index=True)
    token: Mapped[int] = mapped_column(BigInteger)
    expires: Mapped[float] = mapped_column(Double)


class JobCursor(Base):
    """A Logpush job's position in a dataset's shared stream: the first record not yet confirmed by an upload."""

    __tablename__ = "job_cursors"

    dataset: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False
    )
    position: Mapped[int] = mapped_column(BigInteger)
