"""The node's rate limiting counters (``rate_table.c`` through ``rate_counters.py``): the C table answers as its
Python model (``tests/support/rate_table_model.py``) does, whatever the calls; counting is exact across processes;
the sliding window estimate lets through no more than its bound; a flood of distinct keys neither grows memory nor
lets a heavy key through; a bucket lock left by a dead process is taken over; keys are length-prefixed."""

from __future__ import annotations

import mmap
import multiprocessing
import os
import struct
import time
from collections.abc import Iterator
from multiprocessing.reduction import DupFd
from multiprocessing.synchronize import Event
from typing import Protocol

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rate_counters import DEFAULT_SLOTS, RateCounters
from edgeplane.rate_table import HEADER_SIZE, SLOT_SIZE, TAKEOVER_MS, RateTable, layout_size, siphash24
from edgeplane.waf.rate_limits import MACHINE_CLOCK
from tests.support.rate_table_model import (
    LOCK_OFFSET,
    RateTableModel,
    bucket_lock_offset,
    key_bytes,
)
from tests.support.rate_table_model import (
    siphash24 as model_siphash24,
)

KEY = bytes(range(16))
VALUES = st.tuples() | st.tuples(st.text(max_size=6)) | st.tuples(st.text(max_size=4), st.binary(max_size=4))


def new_table(slots: int, key: bytes = KEY) -> RateTable:
    table = RateTable(mmap.mmap(-1, layout_size(slots)), slots)
    table.initialise(key)
    return table


@pytest.fixture
def counters() -> Iterator[RateCounters]:
    counters = RateCounters.create(slots=64)
    yield counters
    counters.close()


# Keys


def test_siphash_matches_the_reference_vectors() -> None:
    # The SipHash paper's key 00..0f: the empty message, and the paper's example message 00..0e.
    assert siphash24(KEY, b"") == model_siphash24(KEY, b"") == 0x726FDB47DD0E0E31
    assert siphash24(KEY, bytes(range(15))) == model_siphash24(KEY, bytes(range(15))) == 0xA129CA6149BE45E5


@given(key=st.binary(min_size=16, max_size=16), data=st.binary(max_size=40))
def test_siphash_matches_the_model(key: bytes, data: bytes) -> None:
    assert siphash24(key, data) == model_siphash24(key, data)


@given(key=st.binary(min_size=16, max_size=16), rule=st.integers(0, 2**32 - 1), values=VALUES)
def test_key_hash_is_siphash_of_the_length_prefixed_key(key: bytes, rule: int, values: tuple[str | bytes, ...]) -> None:
    assert new_table(8, key).key_hash(rule, values) == model_siphash24(key, key_bytes(rule, values))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("ab", "c"), ("a", "bc")),
        (("abc",), ("ab", "c")),
        (("a",), ("a", "")),
        (("a",), (b"a",)),
        ((), ("",)),
    ],
)
def test_keys_are_told_apart_by_their_lengths_and_types(
    one: tuple[str | bytes, ...], other: tuple[str | bytes, ...]
) -> None:
    table = new_table(8)
    assert table.key_hash(1, one) != table.key_hash(1, other)
    assert table.acquire(1, one, 1000, 1, 1, 0, 0) == 0
    assert table.acquire(1, other, 1000, 1, 1, 0, 0) == 0  # its own counter
    assert table.acquire(1, one, 1000, 1, 1, 0, 0) > 0


def test_rules_are_told_apart() -> None:
    table = new_table(8)
    assert table.acquire(1, ("x",), 1000, 1, 1, 0, 0) == 0
    assert table.acquire(2, ("x",), 1000, 1, 1, 0, 0) == 0


# Against the model

KEYS: list[tuple[int, tuple[str | bytes, ...]]] = [(rule, (f"k{index}",)) for rule in (1, 2) for index in range(12)]
PERIODS = (10, 60, 1000)

# (call, key, period, limit, amount, timeout, time step)
Operation = tuple[str, tuple[int, tuple[str | bytes, ...]], int, int, int, int, int]
OPERATION: st.SearchStrategy[Operation] = st.tuples(
    st.sampled_from(["acquire", "acquire", "check", "add"]),
    st.sampled_from(KEYS),
    st.sampled_from(PERIODS),
    st.integers(0, 5),  # limit
    st.integers(0, 3),  # amount
    st.sampled_from([0, 0, 25, 200]),  # timeout
    st.integers(-3, 40),  # time step (a little behind, as another worker's clock read earlier may be)
)


@pytest.mark.parametrize("slots", [8, 16, 32])
@settings(max_examples=150, deadline=None)
@given(operations=st.lists(OPERATION, max_size=120), key=st.binary(min_size=16, max_size=16))
def test_the_table_answers_as_the_model(slots: int, operations: list[Operation], key: bytes) -> None:
    table, model = new_table(slots, key), RateTableModel(slots, key)
    now = 1000
    for name, (rule, values), period, limit, amount, timeout, step in operations:
        now = max(now + step, 0)
        request = (rule, values, period, limit, amount, timeout, now)
        assert getattr(table, name)(*request) == getattr(model, name)(*request), (name, request)
        assert table.occupied(now) == model.occupied(now)
    assert table.take_counts() == model.take_counts()
    assert table.take_counts() == (0, 0)


def test_evictions_in_one_bucket_follow_the_model() -> None:
    # Twenty keys of one rule through one bucket, each counted more than the one before: eviction by rank.
    table, model = new_table(8), RateTableModel(8, KEY)
    for step in range(400):
        request = (7, (f"ip{step % 20}",), 60_000, 50, 1 + step % 20, 0, step)
        assert table.acquire(*request) == model.acquire(*request)
    counts = table.take_counts()
    assert counts == model.take_counts()
    assert counts[0] > 0


def test_counts_saturate() -> None:
    table, model = new_table(8), RateTableModel(8, KEY)
    for now in range(3):
        request = (1, ("x",), 1000, 2**64 - 1, 2**63, 0, now)
        table.add(*request)
        model.add(*request)
        assert table.check(*request) == model.check(*request)
    assert table.take_counts() == model.take_counts() == (0, 2)  # the second and the third add


# What the answers mean


def test_a_timeout_blocks_for_its_length_and_returns_the_time_left() -> None:
    table = new_table(8)
    assert [table.acquire(1, ("a",), 10_000, 2, 1, 5_000, 100) for _ in range(2)] == [0, 0]
    assert table.acquire(1, ("a",), 10_000, 2, 1, 5_000, 200) == 5_000
    assert table.acquire(1, ("a",), 10_000, 2, 1, 5_000, 1_200) == 4_000
    # The block ends at 5200; the window [0, 10000) still holds two.
    assert table.acquire(1, ("a",), 10_000, 2, 1, 5_000, 5_200) == 5_000


def test_add_counts_after_the_answer_and_blocks_past_the_limit() -> None:
    table = new_table(8)
    table.add(1, ("a",), 10_000, 3, 3, 1_000, 0)
    assert table.check(1, ("a",), 10_000, 3, 0, 1_000, 0) == 0  # at the limit, not past it
    table.add(1, ("a",), 10_000, 3, 1, 1_000, 10)
    assert table.check(1, ("a",), 10_000, 3, 0, 1_000, 20) == 990


@settings(max_examples=200, deadline=None)
@given(
    period=st.integers(1, 5_000),
    limit=st.integers(1, 20),
    amount=st.integers(1, 5),
    counted=st.lists(st.tuples(st.integers(0, 3_000), st.integers(1, 5)), max_size=30),
    later=st.integers(0, 20_000),
)
def test_a_throttled_request_is_told_exactly_how_long_to_wait(
    period: int, limit: int, amount: int, counted: list[tuple[int, int]], later: int
) -> None:
    table = new_table(8)
    now = 0
    for step, size in counted:
        now += step
        table.add(1, ("a",), period, limit, size, 0, now)
    now += later % (2 * period)
    wait = table.check(1, ("a",), period, limit, amount, 0, now)
    if wait == 0 or amount > limit:
        return
    assert wait >= 1
    if wait > 1:
        assert table.check(1, ("a",), period, limit, amount, 0, now + wait - 1) > 0
    assert table.check(1, ("a",), period, limit, amount, 0, now + wait) == 0


# The error bound


@settings(max_examples=200, deadline=None)
@given(
    period=st.sampled_from([10, 100, 1000]),
    limit=st.integers(1, 30),
    timeout=st.sampled_from([0, 0, 50, 500]),
    steps=st.lists(st.tuples(st.integers(0, 60), st.integers(1, 3)), min_size=1, max_size=300),
)
def test_no_more_than_the_limit_in_a_window_nor_twice_it_in_a_period(
    period: int, limit: int, timeout: int, steps: list[tuple[int, int]]
) -> None:
    table = new_table(8)
    allowed: list[tuple[int, int]] = []
    now = 0
    for step, amount in steps:
        now += step
        if table.acquire(3, ("10.0.0.1",), period, limit, amount, timeout, now) == 0:
            allowed.append((now, amount))
    windows: dict[int, int] = {}
    for at, amount in allowed:
        windows[at // period] = windows.get(at // period, 0) + amount
    assert all(total <= limit for total in windows.values())
    for start, _ in allowed:  # every span of one period starting at an allowed request
        assert sum(amount for at, amount in allowed if start <= at < start + period) <= 2 * limit


# Across processes


class _Handle(Protocol):
    """A descriptor on its way to a spawned process (``multiprocessing.reduction.DupFd``)."""

    def detach(self) -> int: ...


def _hammer(fd: _Handle, start: Event, attempts: int, results: multiprocessing.Queue[int]) -> None:
    counters = RateCounters.attach(fd.detach())
    start.wait()
    table = counters.table
    allowed = sum(table.acquire(9, ("shared",), 3_600_000, 1000, 1, 0, 5_000 + i % 1000) == 0 for i in range(attempts))
    counters.close()
    results.put(allowed)


def test_processes_sharing_the_table_let_through_exactly_the_limit(counters: RateCounters) -> None:
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    processes = [context.Process(target=_hammer, args=(DupFd(counters.fd), start, 2_000, results)) for _ in range(4)]
    for process in processes:
        process.start()
    start.set()
    allowed = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sum(allowed) == 1000
    assert counters.table.check(9, ("shared",), 3_600_000, 1000, 1, 0, 6_000) > 0


def test_an_attached_process_sees_the_creators_counts(counters: RateCounters) -> None:
    attached = RateCounters.attach(os.dup(counters.fd))
    try:
        assert attached.table.slots == counters.table.slots == 64
        assert counters.table.acquire(1, ("a",), 1000, 1, 1, 0, 0) == 0
        assert attached.table.acquire(1, ("a",), 1000, 1, 1, 0, 0) > 0
    finally:
        attached.close()


def _hold_and_die(fd: _Handle, offset: int) -> None:
    with mmap.mmap(fd.detach(), offset + 4) as mapping:
        struct.pack_into("=I", mapping, offset, (time.monotonic_ns() // 1_000_000) & 0xFFFFFFFF or 1)
    os._exit(0)  # dies holding the bucket's lock


def test_a_lock_left_by_a_dead_process_is_taken_over(counters: RateCounters) -> None:
    table = counters.table
    bucket = table.key_hash(1, ("victim",)) % (table.slots // 8)
    offset = bucket_lock_offset(bucket)
    assert offset == HEADER_SIZE + bucket * 8 * SLOT_SIZE + LOCK_OFFSET
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=_hold_and_die, args=(DupFd(counters.fd), offset))
    process.start()
    process.join(timeout=60)
    with mmap.mmap(counters.fd, layout_size(table.slots)) as mapping:
        (held,) = struct.unpack_from("=I", mapping, offset)
        assert held != 0
        assert table.acquire(1, ("victim",), 1000, 5, 1, 0, 0) == 0
        waited = ((time.monotonic_ns() // 1_000_000) - held) & 0xFFFFFFFF
        assert TAKEOVER_MS <= waited < 30_000
        assert struct.unpack_from("=I", mapping, offset) == (0,)  # released after use
    assert table.acquire(1, ("victim",), 1000, 5, 1, 0, 0) == 0


# The flood


@pytest.mark.parametrize("timeout", [0, 60_000])
def test_a_flood_of_distinct_keys_neither_grows_memory_nor_lets_a_heavy_key_through(timeout: int) -> None:
    slots, limit, period = 1024, 100, 60_000
    mapping = mmap.mmap(-1, layout_size(slots))
    table = RateTable(mapping, slots)
    table.initialise(os.urandom(16))
    heavy_allowed = 0
    heavy_sent = 10 * limit
    flood = 1_000_000
    per_heavy = flood // heavy_sent
    for index in range(flood):
        now = index // 1000  # the whole flood within one window
        table.acquire(5, (f"198.{index}",), period, limit, 1, timeout, now)
        if index % per_heavy == 0:
            heavy_allowed += table.acquire(5, ("203.0.113.7",), period, limit, 1, timeout, now) == 0
    excess = heavy_sent - limit
    assert heavy_allowed - limit <= 0.1 * excess
    evictions, _ = table.take_counts()
    assert evictions >= flood - slots
    assert table.occupied(1000) <= slots
    assert len(mapping) == layout_size(slots)  # the layout is all the memory there is


# The owner of the memory


def test_the_memfd_is_sealed_at_its_size(counters: RateCounters) -> None:
    size = os.fstat(counters.fd).st_size
    assert size == layout_size(64)
    for wrong in (size - 1, size + 1):
        with pytest.raises(PermissionError):
            os.ftruncate(counters.fd, wrong)


def test_the_default_table_is_about_16_mib() -> None:
    assert 16 * 2**20 <= layout_size(DEFAULT_SLOTS) < 17 * 2**20


def test_occupied_slots_expire_after_two_periods_unless_blocked() -> None:
    table = new_table(16)
    table.acquire(1, ("a",), 100, 5, 1, 0, 0)
    table.acquire(1, ("b",), 100, 1, 2, 10_000, 0)  # over at once: blocked until 10000
    assert table.occupied(199) == 2
    assert table.occupied(200) == 1
    assert table.occupied(10_000) == 0


def test_a_buffer_without_a_table_is_refused() -> None:
    blank = mmap.mmap(-1, layout_size(8))
    with pytest.raises(RuntimeError):
        RateTable(blank, 8).acquire(1, (), 10, 1, 1, 0, 0)
    blank[:8] = b"notatabl"
    with pytest.raises(ValueError, match="no rate table"):
        RateTable(blank, 8)
    with pytest.raises(ValueError, match="smaller"):
        RateTable(mmap.mmap(-1, layout_size(8)), 16)
    with pytest.raises(ValueError, match="multiple of 8"):
        layout_size(12)
    table = new_table(8)
    mapping = mmap.mmap(-1, layout_size(16))
    RateTable(mapping, 16).initialise(KEY)
    with pytest.raises(ValueError, match="no rate table"):
        RateTable(mapping, 8)  # another slot count
    with pytest.raises(TypeError, match="str or bytes"):
        table.acquire(1, (1,), 10, 1, 1, 0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="period_ms"):
        table.acquire(1, (), 0, 1, 1, 0, 0)
    with pytest.raises(ValueError, match="negative"):
        table.acquire(1, (), 10, 1, -1, 0, 0)
    table.close()
    with pytest.raises(ValueError, match="closed"):
        table.acquire(1, (), 10, 1, 1, 0, 0)


def test_attach_refuses_a_memfd_without_a_table() -> None:
    fd = os.memfd_create("not-a-table")
    try:
        os.ftruncate(fd, layout_size(8))
        with pytest.raises(ValueError, match="no initialised rate table"):
            RateCounters.attach(fd)
    finally:
        os.close(fd)


def test_the_machine_clock_is_the_time_the_edge_gives() -> None:
    """``MACHINE_CLOCK`` as ``now_ms`` is the machine's monotonic clock, read by the table: the same time as a
    caller's own reading of it."""
    counters = RateCounters.create(1024)
    try:
        table = counters.table
        assert table.acquire(9, ("k",), 600_000, 1, 1, 0, MACHINE_CLOCK) == 0
        now = time.monotonic_ns() // 1_000_000
        assert table.acquire(9, ("k",), 600_000, 1, 1, 0, now) > 0  # counted in the window the clock is in
        assert table.occupied(MACHINE_CLOCK) == 1
    finally:
        counters.close()
