"""Leases on Logpush jobs and the cursors they fence, on SQLite and on a real PostgreSQL server: owners share the
jobs fairly, a dead owner's jobs are taken over once its leases expire, a stale owner cannot move a cursor, what a
claim returns is what ``token`` answers for however slow the claim was (by a clock the test controls), and on
PostgreSQL owners claiming at the same moment never both hold a job."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from edgeplane.logs.database_cursors import DatabaseCursors
from edgeplane.logs.job_leases import JobLeases, LeaseLostError
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.delivery_models import JobLease
from tests.support.postgres import PostgresServer

HTTP = "http_requests"
JOBS = [11, 12, 13, 14]
TTL = 3.0  # the margin of a stalled machine between an owner's claims (the members and leases it counts as live)


class Clock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def members(database: Database, *owners: str, ttl: float = TTL) -> list[JobLeases]:
    """Owners that have all said they are alive, so that each counts the others in its fair share."""
    leases = [JobLeases(database, owner, ttl_seconds=ttl) for owner in owners]
    for lease in leases:
        lease.heartbeat()
    return leases


def settle(leases: list[JobLeases], jobs: list[int] = JOBS, rounds: int = 4) -> list[frozenset[int]]:
    """Each owner claims in turn, a few times over, as their keepers would; what each holds at the end."""
    held: list[frozenset[int]] = []
    for _ in range(rounds):
        held = [lease.claim(jobs) for lease in leases]
    return held


def test_two_owners_split_the_jobs_evenly(database: Database) -> None:
    first, second = members(database, "a", "b")
    held = settle([first, second])
    assert [len(jobs) for jobs in held] == [2, 2]
    assert held[0] | held[1] == set(JOBS)
    assert all(first.holds(job) for job in held[0])
    assert not any(first.holds(job) for job in held[1])


def test_a_single_owner_takes_every_job(database: Database) -> None:
    (only,) = members(database, "a")
    assert only.claim(JOBS) == set(JOBS)


def test_a_dead_owners_jobs_are_taken_over_after_the_lease_time(database: Database) -> None:
    survivor, dead = members(database, "a", "b")
    settle([survivor, dead])
    # "b" stops renewing; until its leases expire, "a" keeps to its share.
    assert len(survivor.claim(JOBS)) == 2
    time.sleep(TTL + 0.2)
    assert survivor.claim(JOBS) == set(JOBS)
    assert not any(dead.holds(job) for job in JOBS)  # by its own clock too, its last claim has run out


def test_a_stale_owner_cannot_save_and_the_new_owner_reads_the_last_saved_cursor(database: Database) -> None:
    (new,) = members(database, "new")
    # "old" is paused past its lease, and wakes up mid-save still believing in it: to its clock no time passed.
    old = JobLeases(database, "old", ttl_seconds=TTL, clock=Clock())
    old.heartbeat()
    held = old.claim([JOBS[0]])
    assert held == {JOBS[0]}
    old_cursors = DatabaseCursors(database, old)
    old_cursors.save(HTTP, JOBS[0], 500)
    time.sleep(TTL + 0.2)  # on the database's clock the lease expires: "new" takes the job over
    assert new.claim([JOBS[0]]) == {JOBS[0]}
    assert old.holds(JOBS[0])
    with pytest.raises(LeaseLostError):
        old_cursors.save(HTTP, JOBS[0], 900)
    new_cursors = DatabaseCursors(database, new)
    assert new_cursors.load(HTTP, JOBS[0]) == 500
    new_cursors.save(HTTP, JOBS[0], 700)
    with pytest.raises(LeaseLostError):
        old_cursors.save(HTTP, JOBS[0], 100)
    assert new_cursors.load(HTTP, JOBS[0]) == 700


def test_the_fencing_token_grows_with_every_change_of_owner(database: Database) -> None:
    first, second = members(database, "a", "b")
    first.claim([JOBS[0]])
    token = first.token(JOBS[0])
    assert token is not None
    first.release_all()
    second.claim([JOBS[0]])
    assert second.token(JOBS[0]) == token + 1
    with database.session() as session:
        lease = session.get(JobLease, JOBS[0])
        assert lease is not None
        assert lease.owner == "b"


def test_an_owner_without_the_lease_cannot_save(database: Database) -> None:
    (owner,) = members(database, "a")
    cursors = DatabaseCursors(database, owner)
    with pytest.raises(LeaseLostError):
        cursors.save(HTTP, JOBS[0], 1)
    assert cursors.load(HTTP, JOBS[0]) is None
    owner.claim([JOBS[0]])
    cursors.save(HTTP, JOBS[0], 1)
    cursors.delete(HTTP, JOBS[0])
    assert cursors.load(HTTP, JOBS[0]) is None


def test_a_joining_owner_gets_a_share_after_the_others_give_some_back(database: Database) -> None:
    first, second = members(database, "a", "b")
    settle([first, second])
    (third,) = members(database, "c")
    held = settle([first, second, third])
    assert sorted(len(jobs) for jobs in held) == [1, 1, 2]
    assert held[0] | held[1] | held[2] == set(JOBS)
    assert len(held[0]) + len(held[1]) + len(held[2]) == len(JOBS)  # no job held twice


def test_a_clean_stop_hands_the_jobs_over_at_once(database: Database) -> None:
    staying, leaving = members(database, "a", "b")
    settle([staying, leaving])
    leaving.release_all()
    assert staying.claim(JOBS) == set(JOBS)
    assert not leaving.holds(JOBS[0])


def test_jobs_no_longer_enabled_are_given_back(database: Database) -> None:
    (owner,) = members(database, "a")
    owner.claim(JOBS)
    assert owner.claim(JOBS[:1]) == {JOBS[0]}
    (other,) = members(database, "b")
    settle([owner, other], JOBS[1:2])
    assert other.claim(JOBS[1:2]) | owner.claim(JOBS[1:2]) == {JOBS[1]}


def slow(clock: Clock, step: Callable[..., object], seconds: float) -> Callable[..., object]:
    """``step`` (a database step of a claim), during which ``clock`` moves on by ``seconds``: a stalled machine."""

    def stalled(*arguments: object) -> object:
        clock.advance(seconds)
        return step(*arguments)

    return stalled


@pytest.mark.parametrize(
    ("stalled", "claimed"),
    [
        ([], set(JOBS)),  # a quick claim
        (["_take"], set(JOBS)),  # each take outlasts the lease: the leases are renewed before the claim returns
        (["_read_held"], set(JOBS)),  # the first transaction outlasts the leases renewed in it: renewed again
        (["_take", "_renew"], set()),  # the renewal is too slow as well: nothing it could vouch for is returned
    ],
)
def test_a_claim_returns_only_the_jobs_token_answers_for_however_long_it_took(
    database: Database, stalled: list[str], claimed: set[int]
) -> None:
    clock = Clock()
    owner = JobLeases(database, "a", ttl_seconds=TTL, clock=clock)
    assert owner.claim(JOBS[:2]) == set(JOBS[:2])  # two held already: renewed, then two taken
    for step in stalled:
        setattr(owner, step, slow(clock, getattr(owner, step), TTL))
    held = owner.claim(JOBS)
    assert held == claimed
    assert {job for job in JOBS if owner.token(job) is not None} == held
    clock.advance(TTL)
    assert not any(owner.holds(job) for job in JOBS)  # and each runs out one ttl after it was last renewed


def test_a_stalled_claim_does_not_renew_the_leases_taken_over_meanwhile(database: Database) -> None:
    clock = Clock()
    stalled = JobLeases(database, "a", ttl_seconds=TTL, clock=clock)
    (other,) = members(database, "b")
    other.release_all()  # "b" is not a member yet: "a" takes every job
    assert stalled.claim(JOBS[:2]) == set(JOBS[:2])
    take = stalled._take
    stalls = [TTL + 0.2]

    def stalled_take(job_id: int) -> int | None:
        if stalls:  # the first take stalls past the lease, long enough that "b" takes the first two jobs over
            stalls.pop()
            time.sleep(TTL + 0.2)
            clock.advance(TTL + 0.2)
            assert other.claim(JOBS[:2]) == set(JOBS[:2])
        return take(job_id)

    stalled._take = stalled_take  # type: ignore[method-assign]
    held = stalled.claim(JOBS)
    assert held == set(JOBS[2:])  # renewed what it still held; the jobs taken over meanwhile are left out
    assert {job for job in JOBS if stalled.token(job) is not None} == held
    assert all(other.holds(job) for job in JOBS[:2])


@pytest.mark.parametrize(
    "bad", [{"owner": ""}, {"owner": "x" * 256}, {"ttl_seconds": 0.0}, {"ttl_seconds": float("nan")}]
)
def test_bad_lease_settings_are_refused(tmp_path: Path, bad: dict[str, object]) -> None:
    database = Database(default_database_url(tmp_path))
    arguments: dict[str, object] = {"owner": "a", "ttl_seconds": 1.0} | bad
    with pytest.raises(ValueError, match=r"owner|ttl_seconds"):
        JobLeases(database, arguments["owner"], ttl_seconds=arguments["ttl_seconds"])  # type: ignore[arg-type]
    database.close()


def test_owners_claiming_at_once_never_both_hold_a_job(postgres: PostgresServer) -> None:
    database = Database(postgres.fresh_database("concurrent_claims"))
    database.migrate()
    # Leases change hands by restarts here, not by expiry: a lease long enough that a stalled machine does not lose
    # one mid-test, so that each claim's jobs still have the token ``claim`` vouched for when they are saved.
    owners = members(database, *(f"owner-{index}" for index in range(4)), ttl=60.0)
    jobs = list(range(1, 41))
    holders: dict[tuple[int, int], set[str]] = {}  # (job, fencing token) -> the owners that held it so
    errors: list[BaseException] = []
    saves = [0]
    start = threading.Barrier(len(owners))

    def keep(lease: JobLeases) -> None:
        cursors = DatabaseCursors(database, lease)
        try:
            start.wait()
            for round_ in range(28):
                if round_ % 7 == 6:  # a restart now and then: its jobs change hands while the others claim
                    lease.release_all()
                for job_id in lease.claim(jobs):
                    token = lease.token(job_id)
                    assert token is not None
                    holders.setdefault((job_id, token), set()).add(lease.owner)
                    try:
                        cursors.save(HTTP, job_id, token)
                        saves[0] += 1
                    except LeaseLostError:
                        pass
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=keep, args=(lease,)) for lease in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert saves[0] > 0
    assert max(token for _job, token in holders) > 3
    assert {key: owners_ for key, owners_ in holders.items() if len(owners_) > 1} == {}
    final = settle(owners, jobs)
    assert sorted(len(held) for held in final) == [10, 10, 10, 10]
    assert frozenset().union(*final) == set(jobs)
    database.close()
