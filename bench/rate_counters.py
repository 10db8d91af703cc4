"""The node's rate limiting counters on their own: nanoseconds per ``RateTable.acquire`` (``rate_table.c``), against
a dict increment in Python in the same run (the baseline: what counting in one process would cost at least).

Cases, each ``--rounds`` times in turn, medians printed: the baseline over one key; ``acquire`` of one key over and
over (its bucket in the cache); ``acquire`` of ``--keys`` distinct keys in a table of the default size (16 MiB, so
most buckets come from memory); and one key counted by one process alone and by two processes at once (spawned,
started together, each timing its own loop: the second figure over the first is what the bucket lock's contention
costs). Every request is allowed (a limit no loop reaches), so each call counts. On a machine shared with other
work the two-process figure is the noisiest: it needs two free cores.

Usage: ``.venv/bin/python bench/rate_counters.py [--calls 200000] [--keys 200000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from multiprocessing.reduction import DupFd
from multiprocessing.synchronize import Barrier
from typing import Protocol

from edgeplane.rate_counters import DEFAULT_SLOTS, RateCounters
from edgeplane.rate_table import RateTable

RULE = 1
PERIOD_MS = 60_000
LIMIT = 10**15
NOW_MS = 1_000
ONE_KEY: tuple[str | bytes, ...] = ("203.0.113.7",)


class _Handle(Protocol):
    def detach(self) -> int: ...


def dict_increment(calls: int) -> float:
    """ns per ``counts[key] = counts.get(key, 0) + 1`` of one key."""
    counts: dict[tuple[int, tuple[str | bytes, ...]], int] = {}
    key = (RULE, ONE_KEY)
    started = time.perf_counter_ns()
    for _ in range(calls):
        counts[key] = counts.get(key, 0) + 1
    return (time.perf_counter_ns() - started) / calls


def acquire_one_key(table: RateTable, calls: int) -> float:
    """ns per ``acquire`` of one key."""
    acquire = table.acquire
    started = time.perf_counter_ns()
    for _ in range(calls):
        acquire(RULE, ONE_KEY, PERIOD_MS, LIMIT, 1, 0, NOW_MS)
    return (time.perf_counter_ns() - started) / calls


def acquire_distinct_keys(table: RateTable, keys: list[tuple[str | bytes, ...]]) -> float:
    """ns per ``acquire`` of each of ``keys`` once."""
    acquire = table.acquire
    started = time.perf_counter_ns()
    for values in keys:
        acquire(RULE, values, PERIOD_MS, LIMIT, 1, 0, NOW_MS)
    return (time.perf_counter_ns() - started) / len(keys)


def _worker(fd: _Handle, barrier: Barrier, calls: int, results: multiprocessing.Queue[float]) -> None:
    counters = RateCounters.attach(fd.detach())
    barrier.wait()
    results.put(acquire_one_key(counters.table, calls))
    counters.close()


def processes_on_one_key(counters: RateCounters, processes: int, calls: int) -> float:
    """ns per ``acquire`` of one key in each of ``processes`` spawned processes counting at once (the mean)."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    started = [
        context.Process(target=_worker, args=(DupFd(counters.fd), barrier, calls, results)) for _ in range(processes)
    ]
    for process in started:
        process.start()
    times = [results.get(timeout=300) for _ in started]
    for process in started:
        process.join()
    return float(statistics.mean(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    counters = RateCounters.create(DEFAULT_SLOTS)
    keys: list[tuple[str | bytes, ...]] = [(f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}",) for n in range(args.keys)]
    figures: dict[str, list[float]] = {name: [] for name in ("dict", "one key", "distinct", "1 process", "2 processes")}
    try:
        for _round in range(args.rounds):
            figures["dict"].append(dict_increment(args.calls))
            figures["one key"].append(acquire_one_key(counters.table, args.calls))
            figures["distinct"].append(acquire_distinct_keys(counters.table, keys))
            figures["1 process"].append(processes_on_one_key(counters, 1, args.calls))
            figures["2 processes"].append(processes_on_one_key(counters, 2, args.calls))
    finally:
        counters.close()
    median = {name: statistics.median(values) for name, values in figures.items()}
    baseline = median["dict"]
    print(f"dict increment (baseline):        {baseline:6.0f} ns")
    one_key = median["one key"]
    print(f"acquire, one key:                 {one_key:6.0f} ns, {one_key / baseline:.2f}x the dict")
    print(
        f"acquire, {args.keys} distinct keys:  {median['distinct']:6.0f} ns, {median['distinct'] / baseline:.2f}x the"
        f" dict, {median['distinct'] / one_key:.2f}x one key"
    )
    print(f"one key, 1 process (spawned):     {median['1 process']:6.0f} ns")
    print(
        f"one key, 2 processes at once:     {median['2 processes']:6.0f} ns,"
        f" contention {median['2 processes'] / median['1 process']:.2f}x one process"
    )


if __name__ == "__main__":
    main()
