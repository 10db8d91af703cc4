"""Edge workers: each listens on the edge port with its own socket, and a worker that dies is started again while
connections made meanwhile wait for it instead of being refused."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx

from tests.support.edgeplane import EdgeplaneProcess

BODY = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}


def edge_worker_pids(parent: int) -> list[int]:
    listed = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(parent)], capture_output=True, text=True)
    return [int(line.split()[0]) for line in listed.stdout.splitlines() if " edge-worker " in line]


def test_connections_made_while_a_worker_restarts_are_answered(tmp_path: Path) -> None:
    with EdgeplaneProcess(tmp_path / "data", extra_args=("--edge-workers", "2")) as service:
        workers = edge_worker_pids(service.pid)  # every worker is a child of the supervisor, worker 0 included
        assert len(workers) == 2
        worker = workers[0]
        os.kill(worker, signal.SIGKILL)
        # New connections each time: the kernel spreads them over both sockets, the dead worker's included.
        for _ in range(40):
            response = httpx.post(service.rpc_url(), json=BODY, timeout=30)
            assert response.status_code == 200
            assert response.json()["result"]
        restarted = edge_worker_pids(service.pid)
        assert len(restarted) == 2
        assert worker not in restarted
