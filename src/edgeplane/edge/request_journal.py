"""The request log's write-ahead journal: the rows of answered requests on disk every ``flush_interval`` (50 ms),
while the log store gets them in bulk once per conversion period (1 s).

Turning rows into an Arrow record batch costs a fixed amount per batch that, on a small machine, is much more than
the rows themselves; doing it once a second rather than twenty times is most of what logging saves by batching. A
``kill -9`` must still lose no more than the last 50 ms of records, so every 50 ms the rows added since the last
look (``RequestRows.chunk``, a few byte strings) are appended to a journal file. There is one file per conversion
period, ``<period>.journal`` in the directory; once the store has written a period's batch (``LogStore.flush`` with no
wait says so), its file is deleted. At start, the files left by a process that did not stop cleanly are read back
and their rows appended to the store (``RequestLog.recover``): a record of a period whose batch the store had
already written when the process died is then stored twice, never lost.

Each chunk is framed as ``<length: u32 LE><CRC-32: u32 LE><payload>``. Reading stops at the first frame that is
cut short or fails its CRC: the write a crash interrupted, or, after a failed write, the rest of that period's file
(the journal then no longer covers that period, but its rows still reach the store when it ends). Written by hand:
a length-and-checksum framing of opaque chunks is a few lines, and no journalling library for Python fits an
append-only file written by one thread and read once at start.

Who writes: the event loop's own thread, as long as writes are quick, the way a web server writes its access log.
A chunk is some tens of kilobytes into the page cache, tens of microseconds. Handing each chunk to a thread cost the
edge more than the write (about 1 µs a request, paired at concurrency 16 on one CPU): the thread's every wake takes
the interpreter's lock from the loop, twice. A write only waits for the disk when the kernel holds too much unwritten
data, which a stalled disk causes; so the first write that takes longer than ``SLOW_WRITE_SECONDS`` makes the journal
hand every later write and deletion to a thread of its own, for the rest of the process's life, and the loop does
not wait on the disk again.
"""

from __future__ import annotations

import os
import queue
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Final

import structlog

log = structlog.get_logger(__name__)

_FRAME: Final = struct.Struct("<II")
_SUFFIX: Final = ".journal"
SLOW_WRITE_SECONDS: Final = 0.01  # a write that took longer: the disk is stalling


class RequestJournal:
    """Journal files in ``directory`` (see the module docstring for who writes them)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        earlier = self.periods()
        self.period = earlier[-1] + 1 if earlier else 0  # the period new chunks belong to
        self.write_errors = 0
        self._queue: queue.SimpleQueue[tuple[str, int, bytes]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started by the first slow write
        self._descriptor, self._open_period = -1, -1  # the file being written, and its period (-1: none)

    def periods(self) -> list[int]:
        """The periods that have a file, oldest first."""
        found = []
        for path in self.directory.glob(f"*{_SUFFIX}"):
            stem = path.name.removesuffix(_SUFFIX)
            if stem.isdigit():
                found.append(int(stem))
        return sorted(found)

    def read(self, period: int) -> list[bytes]:
        """The chunks of ``period``'s file that were written whole."""
        try:
            data = self._path(period).read_bytes()
        except FileNotFoundError:
            return []
        chunks, offset = [], 0
        while offset + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, offset)
            payload = data[offset + _FRAME.size : offset + _FRAME.size + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                log.warning("request journal cut short", period=period, offset=offset, size=len(data))
                break
            chunks.append(payload)
            offset += _FRAME.size + length
        return chunks

    @property
    def threaded(self) -> bool:
        """Whether writes go to the journal's thread (after a slow one)."""
        return self._thread is not None

    def write(self, chunk: bytes) -> None:
        """Appends ``chunk`` to the current period's file: at once, or soon on the journal's thread."""
        self._send("write", self.period, chunk)

    def next_period(self) -> int:
        """Starts a new period (its file is made by its first write) and returns the one that ended."""
        ended = self.period
        self.period += 1
        return ended

    def discard(self, through: int) -> None:
        """Deletes the files of every period up to ``through``, after the writes before this call."""
        self._send("discard", through, b"")

    def discard_now(self, through: int) -> None:
        """Deletes the files of every period up to ``through`` at once (at start, or after close)."""
        for period in self.periods():
            if period <= through:
                self._path(period).unlink(missing_ok=True)

    def close(self) -> None:
        """Writes what was sent, stops the thread if there is one, and closes the file."""
        if self._thread is not None:
            self._queue.put(("close", 0, b""))
            self._thread.join()
            self._thread = None
        self._close_file()

    def _send(self, action: str, period: int, data: bytes) -> None:
        if self._thread is not None:
            self._queue.put((action, period, data))
            return
        started = time.monotonic()
        self._perform(action, period, data)
        took = time.monotonic() - started
        if took > SLOW_WRITE_SECONDS:
            log.warning("request journal slow: writing on a thread from now on", action=action, seconds=took)
            self._thread = threading.Thread(target=self._run, name="request-journal", daemon=True)
            self._thread.start()

    def _path(self, period: int) -> Path:
        return self.directory / f"{period:016d}{_SUFFIX}"

    def _run(self) -> None:
        while True:
            action, period, data = self._queue.get()
            if action == "close":
                return
            self._perform(action, period, data)

    def _perform(self, action: str, period: int, data: bytes) -> None:
        try:
            if action == "discard":
                if self._open_period <= period:
                    self._close_file()
                self.discard_now(period)
                return
            if period != self._open_period:
                self._close_file()
                self._descriptor = os.open(self._path(period), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._open_period = period
            frame = _FRAME.pack(len(data), zlib.crc32(data)) + data
            written = 0
            while written < len(frame):
                written += os.write(self._descriptor, frame[written:])
        except OSError as error:
            self.write_errors += 1
            log.warning("request journal write failed", action=action, period=period, error=str(error))

    def _close_file(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)
        self._descriptor, self._open_period = -1, -1
