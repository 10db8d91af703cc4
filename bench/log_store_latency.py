"""How soon the log store makes an appended record readable, and what an append costs its caller.

The tests check that the flusher writes on its own and that an append never waits for the disk
(tests/logs/test_log_store.py); how fast is measured here, where a busy machine makes a figure slow, not a test fail.

1. Readable: a record is appended, and the store polled until its end position covers it, ``--rounds`` times. The
   median and the slowest are printed in milliseconds and as multiples of ``flush_interval`` (at most about one is
   expected: the flusher writes at the latest every interval).
2. Append: ``--batches`` appends of 100 records each, timed on the caller's side, then until every record is written
   (``flush``). Printed per record, and as the share of the time until written that the caller spent appending (under
   one: the caller only queues what the flusher writes).

Usage: ``.venv/bin/python bench/log_store_latency.py [--rounds 50] [--batches 100] [--flush-interval 0.05] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "src"))

from edgeplane.logs.log_store import SegmentedLogStore  # noqa: E402

DATASET = "http_requests"


def _record(number: int) -> bytes:
    return b'{"RayID":"%016x","EdgeResponseStatus":200,"ClientRequestPath":"/v1/mainnet"}' % number


def readable_delays(directory: Path, rounds: int, flush_interval: float) -> list[float]:
    """Seconds from each append until the record is readable."""
    delays = []
    with SegmentedLogStore(directory, flush_interval=flush_interval) as store:
        store.append(DATASET, [_record(0)])  # creates the dataset's stream
        store.flush()
        for number in range(1, rounds + 1):
            started = time.perf_counter()
            store.append(DATASET, [_record(number)])
            while store.end_position(DATASET) <= number:
                time.sleep(0.0005)
            delays.append(time.perf_counter() - started)
    return delays


def append_and_write(directory: Path, batches: int, flush_interval: float) -> tuple[float, float, int]:
    """Seconds the appends took their caller, seconds from the first append until all were written, and the records
    appended."""
    batch = [_record(number) for number in range(100)]
    with SegmentedLogStore(directory, flush_interval=flush_interval, datasets=[DATASET]) as store:
        started = time.perf_counter()
        for _ in range(batches):
            store.append(DATASET, batch)
        appended = time.perf_counter() - started
        store.flush()
        written = time.perf_counter() - started
    return appended, written, batches * len(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--flush-interval", type=float, default=0.05)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgeplane-bench-") as temporary:
        root = Path(temporary)
        delays = readable_delays(root / "readable", options.rounds, options.flush_interval)
        appended, written, count = append_and_write(root / "append", options.batches, options.flush_interval)
    figures = {
        "readable_median_ms": 1e3 * statistics.median(delays),
        "readable_max_ms": 1e3 * max(delays),
        "readable_median_intervals": statistics.median(delays) / options.flush_interval,
        "readable_max_intervals": max(delays) / options.flush_interval,
        "append_us_per_record": 1e6 * appended / count,
        "written_us_per_record": 1e6 * written / count,
        "append_share": appended / written,
    }
    if options.json:
        print(json.dumps(figures))
        return
    interval_ms = 1e3 * options.flush_interval
    print(
        f"readable after: median {figures['readable_median_ms']:.1f} ms, slowest {figures['readable_max_ms']:.1f} ms "
        f"({figures['readable_median_intervals']:.2f} and {figures['readable_max_intervals']:.2f} flush intervals "
        f"of {interval_ms:.0f} ms)"
    )
    print(
        f"append: {figures['append_us_per_record']:.2f} µs a record to the caller, "
        f"{figures['written_us_per_record']:.2f} µs a record until written (the caller's share "
        f"{figures['append_share']:.2f})"
    )


if __name__ == "__main__":
    main()
