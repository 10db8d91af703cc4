"""The development chain as a child process of ``edgeplane serve``, kept running.

The parent binds the chain's loopback port and hands the socket to the child, so the port is known before the
child starts and nothing can take it in between. If the child dies it is started again (``ChildProcess``); the
gateway meanwhile answers -32002 and retries, as for any failed node.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import structlog

from edgeplane.child_process import ChildProcess
from edgeplane.listeners import bind_listener

log = structlog.get_logger(__name__)


class ChainProcess:
    """Starts and supervises ``edgeplane chain`` serving the given networks."""

    def __init__(
        self,
        *,
        networks: list[str],
        data_dir: Path | None,
        chain_id: int,
        block_time: float | None,
        fresh: bool,
        log_level: str,
        log_format: str,
    ) -> None:
        self.networks = networks
        self.data_dir = data_dir
        self.chain_id = chain_id
        self.block_time = block_time
        self.fresh = fresh
        self.log_level = log_level
        self.log_format = log_format  # the parent's: `serve`'s output is in one format, its children's included
        self._socket = bind_listener("127.0.0.1", 0)
        self._socket.set_inheritable(True)
        self.port: int = self._socket.getsockname()[1]
        self._child: ChildProcess | None = None
        self._stopping = False

    def url(self, network: str) -> str:
        """The JSON-RPC URL of one network's chain."""
        return f"http://127.0.0.1:{self.port}/{network}"

    def _command(self, *, fresh: bool) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "edgeplane",
            "chain",
            "--fd",
            str(self._socket.fileno()),
            "--chain-id",
            str(self.chain_id),
            "--log-level",
            self.log_level,
            "--log-format",
            self.log_format,
        ]
        command += ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--no-persist"]
        if self.block_time is not None:
            command += ["--block-time", str(self.block_time)]
        if fresh:
            command.append("--fresh")
        for network in self.networks:
            command += ["--network", network]
        return command

    async def start(self) -> None:
        """Starts the child and its supervision."""
        self._child = ChildProcess(
            "devchain", lambda first: self._command(fresh=self.fresh and first), pass_fds=(self._socket.fileno(),)
        )
        await self._child.start()
        log.info("started the development chain", networks=self.networks, url=f"http://127.0.0.1:{self.port}/<network>")

    async def wait_ready(self, timeout_seconds: float = 60.0) -> bool:
        """Waits until the chain answers its health check; False if it did not within the timeout."""
        deadline = asyncio.get_running_loop().time() + timeout_seconds
        while asyncio.get_running_loop().time() < deadline:
            if self._stopping:
                return False
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: devchain\r\nConnection: close\r\n\r\n")
                await writer.drain()
                status_line = await asyncio.wait_for(reader.readline(), timeout=5)
                writer.close()
                if b" 200 " in status_line:
                    return True
            except (OSError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
        return False

    async def stop(self) -> None:
        """Stops the child and closes the chain's socket."""
        self._stopping = True
        if self._child is not None:
            await self._child.stop()
        self._socket.close()
