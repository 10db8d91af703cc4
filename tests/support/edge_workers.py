"""Connections held to each edge worker of an ``edgeplane serve``: for end-to-end tests that a change is live on every
worker, not only on the one the kernel happens to pick."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from tests.support.edgeplane import EdgeplaneProcess
from tests.support.raw_http import connect, read_response


def worker_of(sock: socket.socket, workers: list[int], edge_port: int) -> int | None:
    """The edge worker holding the server side of ``sock``: the pid that has the socket whose local port is the edge
    port and remote port is ``sock``'s (``/proc/net/tcp``, then each worker's descriptors)."""
    client_port = sock.getsockname()[1]
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == edge_port and int(remote.split(":")[1], 16) == client_port:
            inode = fields[9]
    if inode is None:
        return None
    for pid in workers:
        for descriptor in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


class WorkerConnection:
    """A keep-alive connection to the edge, and the worker that holds it. ``request`` (a whole HTTP/1.1 request) is
    sent once at once, so that the worker has accepted the connection, and again by each ``ask``."""

    def __init__(self, service: EdgeplaneProcess, workers: list[int], request: bytes) -> None:
        self.service = service
        self.request = request
        self.sock = connect(service.edge_port)
        self.sock.sendall(request)
        read_response(self.sock)
        self.worker = worker_of(self.sock, workers, service.edge_port)

    def ask(self, request: bytes | None = None) -> int:
        """The status of one exchange (``request``, by default the connection's): 200 allowed, 403 blocked (with the
        firewall's JSON-RPC error)."""
        self.sock.sendall(request or self.request)
        status, headers, body = read_response(self.sock)
        if status == 403:
            assert json.loads(body)["error"]["code"] == -32003
        if headers.get("connection", "").lower() == "close":
            self.sock.close()
            self.sock = connect(self.service.edge_port)
        return status

    def close(self) -> None:
        self.sock.close()


def connections_to_every_worker(
    service: EdgeplaneProcess, workers: int, request: bytes, *, each: int = 2
) -> list[WorkerConnection]:
    """``each`` connections held to each of the ``workers`` edge workers (the kernel spreads connections by their
    source port)."""
    pids = service.child_pids("edge-worker")
    assert len(pids) == workers
    held: dict[int, list[WorkerConnection]] = {pid: [] for pid in pids}
    for _ in range(64):
        connection = WorkerConnection(service, pids, request)
        if connection.worker is not None and len(held[connection.worker]) < each:
            held[connection.worker].append(connection)
        else:
            connection.close()
        if all(len(connections) == each for connections in held.values()):
            return [connection for connections in held.values() for connection in connections]
    raise AssertionError(f"64 connections did not reach every worker: {held}")
