"""The journal intake's wake-up: a period renamed to sealed in a watched journal directory sets ``sealed`` at once;
writing a period's file does not.

Without timing: inotify queues an event in the system call that causes it, and the loop looks at the watch's
descriptor at its next turn, so that a few turns of the loop after a file operation show whether it woke the watch
(the same turns after a seal show that they are enough)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edgeplane.logs.seal_watch import SealWatch


async def turns_of_the_loop() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_seal_wakes_the_watch_and_a_write_does_not(tmp_path: Path) -> None:
    directories = [tmp_path / "logs" / "edge-0.journal", tmp_path / "logs" / "edge-1.journal"]
    watch = SealWatch.open(directories)
    assert watch is not None
    try:
        assert all(directory.is_dir() for directory in directories)  # created when missing
        period = directories[1] / "17.journal"
        period.write_bytes(b"rows")
        await turns_of_the_loop()
        assert not watch.sealed.is_set()
        period.rename(directories[1] / "17.sealed")
        await turns_of_the_loop()
        assert watch.sealed.is_set()
        watch.sealed.clear()
        (directories[0] / "3.journal").write_bytes(b"rows")
        await turns_of_the_loop()
        assert not watch.sealed.is_set()
        (directories[0] / "3.journal").rename(directories[0] / "3.sealed")
        await turns_of_the_loop()
        assert watch.sealed.is_set()
    finally:
        watch.close()
