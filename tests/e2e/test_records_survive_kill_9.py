"""Accepted means kept: every request whose answer a client received has its record in the log store, when
``edgeplane serve`` is killed with SIGKILL under load (its children die with it) and restarted on the same data
directory, and when one edge worker is killed so, again and again. A record is stored twice only as part of a journal
period committed again (the period the delivery process had committed to the store and not yet deleted when it
died, which it commits again first when it restarts: the same records, right after the first copy in that worker's
partition), at most one period per kill."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import orjson

from edgeplane.logs.log_store import SegmentedLogStore
from tests.e2e.test_request_records import BODY, child_pids, stored_ray_ids
from tests.support.edgeplane import EdgeplaneProcess

CONNECTIONS = 4
REQUESTS_PER_CONNECTION = 20  # then a new connection, which the kernel may give to another edge worker
UNDER_LOAD = 50  # answers received before each kill
ANSWERED_SECONDS = 60.0  # the most a stalled machine may take to answer them


class Load:
    """``CONNECTIONS`` clients posting JSON-RPC requests on keep-alive connections as fast as they are answered, each
    noting the ray id of every answer it received whole; a connection is opened anew every
    ``REQUESTS_PER_CONNECTION`` requests (so that every edge worker serves some) and when it is refused or broken."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answered: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(CONNECTIONS)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with httpx.Client(timeout=5) as client:
                    for _ in range(REQUESTS_PER_CONNECTION):
                        if self._stop.is_set():
                            return
                        response = client.post(self.url, json=BODY)
                        self.answered.append(response.headers["cf-ray"].split("-")[0])
            except httpx.HTTPError:
                time.sleep(0.02)  # the service is down or restarting


def wait_until_stored(data_dir: Path, answered: list[str], seconds: float = 60) -> list[str]:
    deadline = time.monotonic() + seconds
    while True:
        stored = stored_ray_ids(data_dir)
        missing = set(answered) - set(stored)
        if not missing:
            return stored
        assert time.monotonic() < deadline, f"{len(missing)} of {len(set(answered))} answered records not stored"
        time.sleep(0.2)


def partitions(data_dir: Path) -> list[list[str]]:
    """The ray ids stored in each edge worker's partition, in the store's order."""
    found = []
    for partition in sorted((data_dir / "logs").iterdir()):
        store = SegmentedLogStore(partition, writable=False)
        stored: list[str] = []
        while records := store.read("http_requests", len(stored)).records:
            stored.extend(orjson.loads(record)["RayID"] for record in records)
        found.append(stored)
    return found


def periods_committed_again(stored: list[str]) -> int:
    """How many runs of records ``stored`` (a partition) holds twice in a row; fails if a record is stored twice
    otherwise (which no kill explains)."""
    first: dict[str, int] = {}
    again = 0
    index = 0
    while index < len(stored):
        earlier = first.setdefault(stored[index], index)
        if earlier == index:
            index += 1
            continue
        length = index - earlier  # the run from the first copy of this record up to here comes again, whole
        assert stored[earlier:index] == stored[index : index + length], (
            f"{stored[index]} is stored twice, not as part of a period committed again"
        )
        again += 1
        index += length
    return again


def assert_duplicates_bounded(data_dir: Path, kills: int) -> None:
    committed_again = sum(periods_committed_again(stored) for stored in partitions(data_dir))
    assert committed_again <= kills


def until_answered(load: Load, count: int) -> None:
    """Waits for ``count`` answers in all (with the margin of a stalled machine)."""
    deadline = time.monotonic() + ANSWERED_SECONDS
    while len(load.answered) < count:
        assert time.monotonic() < deadline, f"{len(load.answered)} of {count} requests answered"
        time.sleep(0.01)


def test_every_answered_request_is_stored_across_kills_of_serve(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    service = EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "2"))
    answered: list[str] = []
    kills = 4
    for _ in range(kills):
        service.start()
        with Load(service.rpc_url()) as load:
            until_answered(load, UNDER_LOAD)
            time.sleep(random.uniform(0.0, 0.5))
            service.stop(kill=True)
        answered += load.answered
    assert len(set(answered)) == len(answered)  # a ray id names one request
    with service:  # the restart on the same data directory seals what the killed workers left
        stored = wait_until_stored(data_dir, answered)
        with Load(service.rpc_url()) as load:  # and the service answers again, and stores those too
            until_answered(load, UNDER_LOAD)
        wait_until_stored(data_dir, load.answered)
    assert not set(load.answered) & set(answered)
    assert set(answered) <= set(stored)
    assert_duplicates_bounded(data_dir, kills)


def test_every_answered_request_is_stored_across_kills_of_an_edge_worker(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    kills = 5
    with EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "2")) as service:
        with Load(service.rpc_url()) as load:
            for _ in range(kills):
                until_answered(load, len(load.answered) + UNDER_LOAD)
                time.sleep(random.uniform(0.0, 0.3))
                os.kill(random.choice(child_pids(service.pid, "edge-worker")), signal.SIGKILL)
                time.sleep(0.3)  # the supervisor starts another
            until_answered(load, len(load.answered) + UNDER_LOAD)  # answered again by both workers' sockets
        assert len(set(load.answered)) == len(load.answered)
        wait_until_stored(data_dir, load.answered)
    assert_duplicates_bounded(data_dir, kills)
