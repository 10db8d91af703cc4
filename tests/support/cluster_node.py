"""One node of an edgeplane cluster for end-to-end tests: ``edgeplane serve --role ROLE`` on loopback and free
ports, with its own data directory, the cluster's PostgreSQL and log bus, and an ops listener whose ``/readyz`` says
when it is ready. An ``EdgeplaneProcess`` otherwise (its URLs, credentials and ``v4``), except that the node runs in
a session of its own, so that ``kill()`` takes every process of it at once, as when a machine dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.anvil import free_port
from tests.support.edgeplane import EdgeplaneProcess


class NodeDidNotStart(RuntimeError):
    """The node exited, or did not become ready in time."""


class ClusterNodeProcess(EdgeplaneProcess):
    """``python -m edgeplane serve --role ROLE`` with the cluster's database and bus; ``settings`` is written to
    the data directory's ``edgeplane.toml`` before each start."""

    def __init__(
        self,
        role: str,
        data_dir: Path,
        *,
        database_url: str,
        bus: str,
        settings: str = "",
        upstreams: tuple[str, ...] = (),
        edge_workers: int = 1,
    ) -> None:
        super().__init__(data_dir, upstreams=upstreams)
        self.role = role
        self.database_url = database_url
        self.bus = bus
        self.settings = settings
        self.edge_workers = edge_workers
        self.ops_port = free_port()

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "edgeplane",
            "serve",
            "--role",
            self.role,
            "--data-dir",
            str(self.data_dir),
            "--database-url",
            self.database_url,
            "--ops-port",
            str(self.ops_port),
            "--log-format",
            "json",
        ]
        if self.role != "api":
            command += ["--bus", self.bus]
        if self.role == "edge":
            command += ["--edge-port", str(self.edge_port), "--edge-workers", str(self.edge_workers)]
            command += [argument for upstream in self.upstreams for argument in ("--upstream", upstream)]
        if self.role == "api":
            command += ["--api-port", str(self.api_port)]
        return command

    def start(self, timeout: float = 90.0) -> ClusterNodeProcess:
        """Starts the node and waits until its ``/readyz`` answers 200 (and, for an edge or API node, its listener
        answers ``/healthz``)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "edgeplane.toml").write_text(self.settings, encoding="utf-8")
        env = {key: value for key, value in os.environ.items() if not key.startswith("EDGEPLANE_")}
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise NodeDidNotStart(f"{self.role} node exited with {self._process.returncode}: {self.log()}")
            if self.ready():
                return self
            time.sleep(0.1)
        self.kill()
        raise NodeDidNotStart(f"{self.role} node not ready within {timeout} s: {self.log()}")

    def readiness(self) -> dict[str, Any] | None:
        """The body of ``/readyz``, or None when the ops listener does not answer."""
        try:
            response = httpx.get(f"{self.ops_url}/readyz", timeout=2)
        except httpx.HTTPError:
            return None
        body: dict[str, Any] = response.json()
        return body

    def ready(self) -> bool:
        readiness = self.readiness()
        if readiness is None or not readiness["ready"]:
            return False
        if self.role == "edge":
            return self._healthy(self.edge_url)
        if self.role == "api":
            return self._healthy(self.api_url)
        return True

    def kill(self) -> None:
        """SIGKILL to every process of the node at once (its session), as when its machine dies."""
        self._end(graceful=False)

    def stop(self, *, kill: bool = False) -> int | None:
        """SIGTERM to the supervisor, which stops its children; SIGKILL to what is left of the session after a
        grace period (``kill``: at once)."""
        return self._end(graceful=not kill)

    def _end(self, *, graceful: bool) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if graceful and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return process.wait()
