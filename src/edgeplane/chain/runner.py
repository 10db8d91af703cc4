"""Running the development chain's JSON-RPC server until a signal: standalone (``edgeplane chain``) or as the
child process ``edgeplane serve`` starts for networks that have no upstream node."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import warnings
from pathlib import Path

import structlog

from edgeplane.chain.server import ChainServerApp, MiningConfig, chain_factory
from edgeplane.listeners import asgi_server

log = structlog.get_logger(__name__)


async def run_chain_server(
    listener: socket.socket,
    *,
    chain_id: int,
    data_dir: Path | None,
    block_time: float | None,
    networks: frozenset[str] | None,
    accounts: int = 10,
) -> None:
    """Serves the chains on ``listener`` until SIGINT or SIGTERM; closes their databases on the way out."""
    # py-evm warns on every SELFDESTRUCT it executes: noise for a node whose users run whatever contracts they like.
    warnings.filterwarnings("ignore", message="SELFDESTRUCT opcode present", category=DeprecationWarning)
    app = ChainServerApp(
        chain_factory(chain_id=chain_id, data_dir=data_dir, mining=MiningConfig(block_time), accounts=accounts),
        names=networks,
    )
    if networks is None:
        app.node("default")  # standalone: create (or open) the chain now, so that problems show at start
    server = asgi_server(app)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, lambda: setattr(server, "should_exit", True))
    host, port = listener.getsockname()[:2]
    log.info("development chain listening", url=f"http://{host}:{port}", chain_id=chain_id, data_dir=str(data_dir))
    try:
        await server.serve([listener])
    finally:
        await app.close()


def prepare_data_dir(data_dir: Path | None, *, fresh: bool) -> None:
    """Creates the chain's directory; with ``fresh``, removes what an earlier run stored there."""
    if data_dir is None:
        return
    if fresh and data_dir.exists():
        shutil.rmtree(data_dir)
        log.info("removed the stored chain; starting fresh", data_dir=str(data_dir))
    data_dir.mkdir(parents=True, exist_ok=True)
