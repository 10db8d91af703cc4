"""The journal intake's wake-up: a period renamed to sealed in a watched journal directory sets ``sealed`` at once;
writing a period's file does not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edgeplane.logs.seal_watch import SealWatch


async def test_a_seal_wakes_the_watch_and_a_write_does_not(tmp_path: Path) -> None:
    directories = [tmp_path / "logs" / "edge-0.journal", tmp_path / "logs" / "edge-1.journal"]
    watch = SealWatch.open(directories)
    assert watch is not None
    try:
        assert all(directory.is_dir() for directory in directories)  # created when missing
        period = directories[1] / "17.journal"
        period.write_bytes(b"rows")
        await asyncio.sleep(0.05)
        assert not watch.sealed.is_set()
        period.rename(directories[1] / "17.sealed")
        await asyncio.wait_for(watch.sealed.wait(), 2.0)
        watch.sealed.clear()
        (directories[0] / "3.journal").write_bytes(b"rows")
        (directories[0] / "3.journal").rename(directories[0] / "3.sealed")
        await asyncio.wait_for(watch.sealed.wait(), 2.0)
    finally:
        watch.close()
