"""Accepted means kept: every request whose answer a client received has its record in the log store, when
``edgeplane serve`` is killed with SIGKILL under load (its children die with it) and restarted on the same data
directory, and when one edge worker is killed so, again and again. Duplicates are bounded by one journal period per
kill (a period the delivery process appended to the store and had not deleted when it died)."""

from __future__ import annotations

import collections
import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx

from tests.e2e.test_request_records import BODY, child_pids, stored_ray_ids
from tests.support.edgeplane import EdgeplaneProcess

CONNECTIONS = 4
REQUESTS_PER_CONNECTION = 20  # then a new connection, which the kernel may give to another edge worker
MAX_ROWS = 8192  # ``RequestLog.max_rows``: the most records a journal period holds


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


def assert_duplicates_bounded(stored: list[str], kills: int) -> None:
    twice = [ray for ray, count in collections.Counter(stored).items() if count > 1]
    assert len(twice) <= kills * MAX_ROWS


def test_every_answered_request_is_stored_across_kills_of_serve(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    service = EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "2"))
    answered: list[str] = []
    kills = 4
    for _ in range(kills):
        service.start()
        with Load(service.rpc_url()) as load:
            while len(load.answered) < 50:  # under load
                time.sleep(0.01)
            time.sleep(random.uniform(0.0, 0.5))
            service.stop(kill=True)
        answered += load.answered
    assert len(answered) > kills * 50
    with service:  # the restart on the same data directory seals what the killed workers left
        stored = wait_until_stored(data_dir, answered)
    assert_duplicates_bounded(stored, kills)


def test_every_answered_request_is_stored_across_kills_of_an_edge_worker(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    kills = 5
    with EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "2")) as service:
        with Load(service.rpc_url()) as load:
            for _ in range(kills):
                before = len(load.answered)
                while len(load.answered) < before + 50:
                    time.sleep(0.01)
                time.sleep(random.uniform(0.0, 0.3))
                os.kill(random.choice(child_pids(service.pid, "edge-worker")), signal.SIGKILL)
                time.sleep(0.3)  # the supervisor starts another
            before = len(load.answered)
            while len(load.answered) < before + 50:  # answered again by both workers' sockets
                time.sleep(0.01)
        stored = wait_until_stored(data_dir, load.answered)
    assert_duplicates_bounded(stored, kills)
