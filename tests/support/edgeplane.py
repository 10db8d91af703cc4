"""An ``edgeplane serve`` process for end-to-end tests, on loopback and free ports, with its own data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.support.anvil import free_port


class EdgeplaneDidNotStart(RuntimeError):
    """The service exited or did not answer /healthz in time."""


def allow_loopback_destinations(data_dir: Path) -> None:
    """Lets the service started on ``data_dir`` push Logpush batches to loopback (the test receivers), as an operator
    would allow a network: ``<data dir>/edgeplane.toml``, read at start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "edgeplane.toml").write_text(
        '[logs.destinations]\nallowed_networks = ["127.0.0.0/8", "::1/128"]\n', encoding="utf-8"
    )


class EdgeplaneProcess:
    """``python -m edgeplane serve`` with the given flags; ``.edge_url``/``.api_url`` when started."""

    def __init__(self, data_dir: Path, *, upstreams: tuple[str, ...] = (), extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.upstreams = list(upstreams)
        self.extra_args = list(extra_args)
        self.edge_port = free_port()
        self.api_port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The process id of ``edgeplane serve``; raises when it is not running."""
        if self._process is None:
            raise RuntimeError("edgeplane is not running")
        return self._process.pid

    def child_pids(self, role: str) -> list[int]:
        """The process ids of the children of ``edgeplane serve`` running ``edgeplane <role>`` (``api``,
        ``edge-worker``, ``delivery``, ``chain``), from /proc."""
        try:
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        except OSError:
            return []
        found = []
        for child in children:
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue  # it exited meanwhile
            if (
                "edgeplane" in argv
                and argv.index("edgeplane") + 1 < len(argv)
                and argv[argv.index("edgeplane") + 1] == role
            ):
                found.append(int(child))
        return found

    @property
    def edge_url(self) -> str:
        return f"http://127.0.0.1:{self.edge_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def rpc_url(self, network: str = "mainnet") -> str:
        return f"{self.edge_url}/v1/{network}"

    @property
    def credentials(self) -> dict[str, Any]:
        """The bootstrap identity the service wrote on first start."""
        loaded: dict[str, Any] = json.loads((self.data_dir / "credentials.json").read_text())
        return loaded

    def v4(self, method: str, path: str, **kwargs: Any) -> Any:
        """The result of a successful v4 call with the bootstrap token (``{zone}`` and ``{account}`` in ``path`` are
        the bootstrap zone's and account's ids); fails the test on an unsuccessful envelope."""
        credentials = self.credentials
        headers = {"Authorization": f"Bearer {credentials['api_token']}"}
        path = path.replace("{zone}", credentials["zone_id"]).replace("{account}", credentials["account_id"])
        response = httpx.request(method, f"{self.api_url}/client/v4{path}", headers=headers, timeout=30, **kwargs)
        body = response.json()
        assert body["success"], body
        return body["result"]

    def file_destination(self, path: str, scope: str = "/zones/{zone}") -> dict[str, str]:
        """A job's ``destination_conf`` for ``path`` under the service's file root (``<data dir>/destinations``) and
        its ``ownership_challenge``, read where the service wrote it."""
        conf = f"file://{self.data_dir / 'destinations'}/{path}"
        written = self.v4("POST", f"{scope}/logpush/ownership", json={"destination_conf": conf})
        return {"destination_conf": conf, "ownership_challenge": Path(written["filename"]).read_text().strip()}

    def start(self, timeout: float = 60.0) -> EdgeplaneProcess:
        """Starts the service and waits until the edge and the API answer ``/healthz``. The timeout is generous: every
        edge worker and the API is a child process that imports what it runs, together on a machine busy with other
        tests."""
        command = [
            sys.executable,
            "-m",
            "edgeplane",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--edge-port",
            str(self.edge_port),
            "--api-port",
            str(self.api_port),
            "--log-format",
            "json",
            *[arg for upstream in self.upstreams for arg in ("--upstream", upstream)],
            *self.extra_args,
        ]
        log = self.log_path.open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEPLANE_")}
        self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EdgeplaneDidNotStart(f"edgeplane exited with {self._process.returncode}: {self.log()}")
            if self._healthy(self.api_url) and self._edge_workers_ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise EdgeplaneDidNotStart(f"edgeplane did not answer /healthz within {timeout}s: {self.log()}")

    def _edge_workers_ready(self) -> bool:
        """Whether every edge worker answers. The kernel spreads connections over the workers' sockets by their
        source port, and a connection to a worker that is still starting waits in its socket's backlog (here: times
        out), so sixteen fresh connections that all answer reach every worker of a few all but surely."""
        return all(self._healthy(self.edge_url) for _ in range(16))

    @staticmethod
    def _healthy(url: str) -> bool:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self, *, kill: bool = False) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def __enter__(self) -> EdgeplaneProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
