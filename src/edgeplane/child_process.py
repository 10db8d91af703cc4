"""A child process of ``edgeplane serve`` kept running: started with inherited sockets, started again when it dies
(after a pause that doubles up to 30 s), stopped with SIGTERM and, after a grace period, SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

log = structlog.get_logger(__name__)

# A child that ran this long before it exited is started again after the shortest pause.
_HEALTHY_RUN_SECONDS = 60.0

_shutting_down = False


def begin_shutdown() -> None:
    """From now on, no child of this process is started again when it exits: the supervisor is stopping. A signal
    sent to the whole process group (a terminal's Ctrl-C) reaches the children as it reaches the supervisor, and a
    child that exits before the supervisor stops it must not be started again."""
    global _shutting_down
    _shutting_down = True


class ChildProcess:
    """One supervised child. ``command(first)`` gives the argument list; ``first`` is False for restarts."""

    def __init__(
        self,
        name: str,
        command: Callable[[bool], Sequence[str]],
        *,
        pass_fds: Sequence[int] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self._command = command
        self._pass_fds = tuple(pass_fds)
        self._env = dict(env) if env is not None else None
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def pid(self) -> int | None:
        """The running child's process id."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the child is running now (not between a death and its restart)."""
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Starts the child and its supervision."""
        await self._spawn(first=True)
        self._supervisor = asyncio.create_task(self._supervise(), name=f"supervise-{self.name}")

    async def _spawn(self, *, first: bool) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self._command(first), pass_fds=self._pass_fds, env=self._env
        )
        log.info("started a child process", child=self.name, pid=self._process.pid)

    async def _supervise(self) -> None:
        pause = 0.5
        while not self._stopping:
            assert self._process is not None
            started = time.monotonic()
            code = await self._process.wait()
            if self._stopping or _shutting_down:
                return
            if time.monotonic() - started > _HEALTHY_RUN_SECONDS:
                pause = 0.5  # it ran well before it died: a new fault, not a crash loop
            log.error("a child process exited; starting it again", child=self.name, exit_code=code, pause=pause)
            await asyncio.sleep(pause)
            if self._stopping or _shutting_down:
                return
            pause = min(pause * 2, 30.0)
            await self._spawn(first=False)

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Stops the child (SIGTERM, then SIGKILL after ``grace_seconds``)."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout=grace_seconds)
            except TimeoutError:
                process.kill()
                await process.wait()


def die_with_parent() -> None:
    """In a child process: ask the kernel for SIGTERM when the parent dies (even by SIGKILL), so that no child
    outlives ``edgeplane serve`` and holds its ports. Linux only; elsewhere a no-op."""
    import ctypes
    import os
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
