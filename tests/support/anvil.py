"""A local anvil node for tests: started on 127.0.0.1 and a free port, stoppable and restartable on that port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO_ROOT / "tests" / "tools" / "node_modules" / ".bin" / "anvil"

# The first dev keys of anvil's default mnemonic ("test test ... junk"); anvil derives the same ones on every start.
DEV_PRIVATE_KEYS: tuple[str, ...] = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
)
DEV_ADDRESSES: tuple[str, ...] = (
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
)


class AnvilNotInstalled(RuntimeError):
    """The anvil binary is missing."""


class AnvilDidNotStart(RuntimeError):
    """anvil exited or did not answer eth_chainId in time."""


def anvil_binary() -> Path:
    """The anvil executable: ``EDGEPLANE_ANVIL_BIN`` if set, else the one ``scripts/bootstrap dev`` installs."""
    binary = Path(os.environ.get("EDGEPLANE_ANVIL_BIN", str(DEFAULT_BINARY)))
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise AnvilNotInstalled(
            f"anvil not found at {binary}: run `scripts/bootstrap dev` (or set EDGEPLANE_ANVIL_BIN)"
        )
    return binary


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (it may be taken again before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class AnvilNode:
    """One anvil process on 127.0.0.1.

    ``start()`` picks a free port the first time (anvil has no ``--port 0``) and retries on a collision; later starts
    reuse that port, so a test can stop the node and bring it back at the same URL. The node answers
    ``eth_chainId`` when ``start()`` returns. Use as a context manager to stop it on exit.
    """

    private_keys = DEV_PRIVATE_KEYS
    addresses = DEV_ADDRESSES

    def __init__(
        self,
        *,
        chain_id: int = 31337,
        block_time: float | None = None,
        extra_args: tuple[str, ...] = (),
        startup_timeout: float = 10.0,
    ) -> None:
        self.chain_id = chain_id
        self.block_time = block_time
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("anvil has not been started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> AnvilNode:
        """Starts anvil (again) and waits until it answers; raises AnvilDidNotStart if it does not."""
        if self.running:
            return self
        binary = anvil_binary()
        if self._port is not None:
            # A restart: the port is the node's identity for the test, so it is kept; the previous process may
            # take a moment to release it.
            for attempt in range(5):
                try:
                    self._launch(binary, self._port)
                except AnvilDidNotStart:
                    if attempt == 4:
                        raise
                    time.sleep(0.2)
                    continue
                return self
        last_error: AnvilDidNotStart | None = None
        for _ in range(5):
            port = free_port()
            try:
                self._launch(binary, port)
            except AnvilDidNotStart as error:
                last_error = error  # most likely someone took the port between our bind and anvil's
                continue
            self._port = port
            return self
        assert last_error is not None
        raise last_error

    def stop(self) -> None:
        """Terminates anvil and waits for it to exit; the port is kept for a later ``start()``."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        """One JSON-RPC call to the node; returns ``result`` or raises RuntimeError with the node's error."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
        request = urllib.request.Request(self.url, data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def __enter__(self) -> AnvilNode:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _launch(self, binary: Path, port: int) -> None:
        args = [
            str(binary),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--chain-id",
            str(self.chain_id),
            "--silent",
        ]
        if self.block_time is not None:
            args += ["--block-time", str(self.block_time)]
        args += list(self.extra_args)
        # stderr goes to a file, not a pipe nobody drains, so a chatty node can never block on it.
        with tempfile.TemporaryFile() as stderr:
            process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
            deadline = time.monotonic() + self.startup_timeout
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    stderr.seek(0)
                    said = stderr.read().decode(errors="replace").strip()
                    raise AnvilDidNotStart(f"anvil exited with {process.returncode} on port {port}: {said}")
                if _answers_chain_id(port):
                    self._process = process
                    return
                time.sleep(0.02)
        process.kill()
        process.wait()
        raise AnvilDidNotStart(f"anvil did not answer eth_chainId on port {port} within {self.startup_timeout}s")


def _answers_chain_id(port: int) -> bool:
    body = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=1) as response:
            return "result" in json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        return False
