"""The request log's write-ahead journal, and the hand-off of the edge's records to the log store: the rows of
answered requests on disk every ``flush_interval`` (50 ms), in one file per period of about a second, which the
delivery process takes into the log store once the period is sealed.

Why a hand-off rather than the store in the edge worker: turning rows into an Arrow record batch, serialising it and
writing it with the store's own thread cost the edge worker more than building the rows did (its thread's every
wake takes the interpreter's lock from the event loop, twice), and all of that work can wait a second and run in
another process. So the edge worker only journals: every 50 ms the rows added since the last look
(``RequestRows.take_chunk``, a few byte strings) are appended to the period's file, ``<period>.journal``; at the end
of the period (``RequestLog``: a second, or ``max_rows`` rows) the file is **sealed**, renamed to
``<period>.sealed``, and never written again. The delivery process (``edgeplane.edge.journal_intake``) takes the
sealed files in order, appends their rows to the worker's log store, waits until the store has written them, and
deletes the files. A ``kill -9`` of the edge worker loses at most the records of its last 100 ms (50 ms as answers
not yet told to the request log, 50 ms as rows not yet journalled): the files it left
unsealed are sealed when a worker starts on the same journal (``RequestJournal``), or by the delivery process for a
partition no worker runs any more (``seal_leftovers``). A record whose period the store had written when the
delivery process died is stored twice, never lost.

Each chunk is framed as ``<length: u32 LE><CRC-32: u32 LE><payload>``. Reading stops at the first frame that is
cut short or fails its CRC: the write a crash interrupted. A write that fails (a full disk) is cut off the file and
tried again, in order, with the next write and at the seal; only frames still failing then are lost (logged).
Written by hand: a length-and-checksum framing of opaque chunks is a few lines, and no journalling library for Python
fits append-only files written by one thread and handed whole to another process.

Who writes: the event loop's own thread, as long as writes are quick, the way a web server writes its access log.
A chunk is some tens of kilobytes into the page cache, tens of microseconds. Handing each chunk to a thread cost the
edge more than the write (about 1 µs a request, paired at concurrency 16 on one CPU): the thread's every wake takes
the interpreter's lock from the loop, twice. A write only waits for the disk when the kernel holds too much unwritten
data, which a stalled disk causes; so the first write that takes longer than ``SLOW_WRITE_SECONDS`` makes the journal
hand every later write and seal to a thread of its own, for the rest of the process's life, and the loop does
not wait on the disk again. ``flush`` (and ``close``) return only once that thread has performed every write and seal
sent before them: they are for shutdown, scripts and tests, which want the files on disk, never for the loop's
periodic writes.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import struct
import threading
import time
from pathlib import Path
from typing import Final

import structlog
from isal.isal_zlib import crc32  # the same CRC-32 as zlib's, many times faster
from prometheus_client import Counter

log = structlog.get_logger(__name__)

_FRAME: Final = struct.Struct("<II")
_OPEN: Final = ".journal"  # a period being written
_SEALED: Final = ".sealed"  # a period written whole, for the delivery process to take
_SET_ASIDE: Final = ".unreadable"  # a sealed period the delivery process could not take
JOURNAL_DROPPED_BYTES = Counter(
    "edgeplane_log_journal_dropped_bytes_total",
    "Bytes of request journal periods deleted untaken (the delivery process fell behind by more than the bound).",
)
SLOW_WRITE_SECONDS: Final = 0.01  # a write that took longer: the disk is stalling


class RequestJournal:
    """The journal an edge worker writes in ``directory`` (see the module docstring for who writes and when)."""

    def __init__(self, directory: Path, *, max_backlog_bytes: int | None = None) -> None:
        """Seals the files a process that did not stop cleanly left in ``directory``: no one writes them any more.
        ``max_backlog_bytes`` bounds the sealed periods that the delivery process has not taken yet (it is down, or
        cannot write the store), those found at start included: beyond it the oldest are deleted, with a warning."""
        self.directory = directory
        self.max_backlog_bytes = max_backlog_bytes
        directory.mkdir(parents=True, exist_ok=True)
        seal_leftovers(directory)
        sealed = sealed_periods(directory)
        earlier = sealed + _periods(directory, _SET_ASIDE)
        self.period = max(earlier) + 1 if earlier else 0  # the period new chunks belong to: never a used number
        self.write_errors = 0
        # Writes and seals for the thread; ``Queue`` rather than ``SimpleQueue`` so that ``flush`` can wait until
        # every one sent is performed (``join``): the thread's writes wait on the disk anyway.
        self._queue: queue.Queue[tuple[str, int, bytes]] = queue.Queue()
        self._thread: threading.Thread | None = None  # started by the first slow write
        self._descriptor, self._open_period = -1, -1  # the file being written, and its period (-1: none)
        self._size = 0  # the bytes of whole frames in it
        self._unwritten: list[bytes] = []  # frames of the open period whose write failed, in order
        # The sealed periods that may not be taken yet, oldest first: (period, bytes); those found at start too.
        self._backlog: collections.deque[tuple[int, int]] = collections.deque()
        for period in sealed:
            with contextlib.suppress(OSError):
                self._backlog.append((period, _path(directory, period, _SEALED).stat().st_size))
        self._backlog_bytes = sum(size for _period, size in self._backlog)

    @property
    def threaded(self) -> bool:
        """Whether writes go to the journal's thread (after a slow one)."""
        return self._thread is not None

    def write(self, chunk: bytes) -> None:
        """Appends ``chunk`` to the current period's file: at once, or soon on the journal's thread."""
        self._send("write", self.period, chunk)

    def seal(self) -> None:
        """Ends the current period: its file (if it has one) is sealed after the writes before this call, and the
        next write starts the next period's file."""
        self._send("seal", self.period, b"")
        self.period += 1

    def flush(self) -> None:
        """Returns once every write and seal sent before this call is performed: at once while writes are on the
        caller's thread, else when the journal's thread has done them (as long as the disk takes)."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Performs every write and seal sent before this call, stops the thread if there is one, and closes the
        file (unsealed: call ``seal`` first to hand its rows over)."""
        if self._thread is not None:
            self._queue.put(("close", 0, b""))
            self._thread.join()
            self._thread = None
        self._perform("close", self.period, b"")

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

    def _run(self) -> None:
        while True:
            action, period, data = self._queue.get()
            try:
                if action == "close":
                    return
                self._perform(action, period, data)
            except Exception:  # the thread must outlive one bad write: later ones, and ``flush``, wait on it
                log.exception("request journal: a write failed on the journal's thread", action=action, period=period)
            finally:
                self._queue.task_done()

    def _perform(self, action: str, period: int, data: bytes) -> None:
        if action == "write":
            self._unwritten.append(_FRAME.pack(len(data), crc32(data)) + data)
            self._write_unwritten(period)
            return
        if self._unwritten:
            self._write_unwritten(period)  # a last try before the period ends
            if self._unwritten:
                log.error("request journal: records lost, their writes kept failing", period=period)
                self._unwritten.clear()
        size = self._size if self._open_period == period else 0
        self._close_file()
        if action == "seal":
            try:
                _seal(self.directory, period)
            except OSError as error:  # sealed by the next worker to start on this journal
                log.warning("request journal seal failed", period=period, error=str(error))
            else:
                if size:
                    try:
                        self._bound_backlog(period, size)
                    except OSError as error:  # tried again at the next seal
                        log.warning("request journal backlog not trimmed", error=str(error))

    def _bound_backlog(self, period: int, size: int) -> None:
        """Counts a sealed period in the backlog, forgets those taken since (the oldest first: the delivery process
        takes them in order), and deletes the oldest while the rest is over ``max_backlog_bytes``."""
        backlog = self._backlog
        backlog.append((period, size))
        self._backlog_bytes += size
        while backlog and not _path(self.directory, backlog[0][0], _SEALED).exists():
            self._backlog_bytes -= backlog.popleft()[1]
        limit = self.max_backlog_bytes
        while limit is not None and self._backlog_bytes > limit and len(backlog) > 1:
            oldest, oldest_size = backlog.popleft()
            self._backlog_bytes -= oldest_size
            delete_sealed(self.directory, oldest)
            JOURNAL_DROPPED_BYTES.inc(oldest_size)
            log.warning(
                "request journal over its bound, the oldest period deleted: the delivery process is not taking them",
                period=oldest,
                bytes=oldest_size,
                limit=limit,
            )

    def _write_unwritten(self, period: int) -> None:
        """Writes the frames that wait, in order. A write that fails is cut off the file (so that what follows is
        read) and tried again with the next write or seal."""
        try:
            if period != self._open_period:
                self._close_file()
                self._descriptor = os.open(
                    _path(self.directory, period, _OPEN), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
                )
                self._open_period, self._size = period, os.fstat(self._descriptor).st_size
            while self._unwritten:
                frame = self._unwritten[0]
                written = 0
                while written < len(frame):
                    written += os.write(self._descriptor, frame[written:])
                self._size += written
                del self._unwritten[0]
        except OSError as error:
            self.write_errors += 1
            log.warning("request journal write failed", period=period, error=str(error))
            if self._descriptor >= 0:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._descriptor, self._size)

    def _close_file(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)
        self._descriptor, self._open_period = -1, -1


def sealed_periods(directory: Path) -> list[int]:
    """The sealed periods in a journal directory, oldest first."""
    return _periods(directory, _SEALED)


def read_sealed(directory: Path, period: int) -> list[bytes]:
    """The chunks of a sealed period that were written whole."""
    try:
        data = _path(directory, period, _SEALED).read_bytes()
    except FileNotFoundError:
        return []
    chunks, offset = [], 0
    while offset + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, offset)
        payload = data[offset + _FRAME.size : offset + _FRAME.size + length]
        if len(payload) != length or crc32(payload) != crc:
            log.warning("request journal cut short", directory=str(directory), period=period, offset=offset)
            break
        chunks.append(payload)
        offset += _FRAME.size + length
    return chunks


def delete_sealed(directory: Path, period: int) -> None:
    """Deletes a sealed period's file, once its rows are in the log store."""
    _path(directory, period, _SEALED).unlink(missing_ok=True)


def set_aside(directory: Path, period: int) -> None:
    """Renames a sealed period the intake cannot take to ``<period>.unreadable``, kept for inspection."""
    os.rename(_path(directory, period, _SEALED), _path(directory, period, _SET_ASIDE))


def seal_leftovers(directory: Path) -> list[int]:
    """Seals every period still open in ``directory``, whose writer is gone; returns those periods."""
    leftovers = _periods(directory, _OPEN)
    for period in leftovers:
        _seal(directory, period)
    if leftovers:
        log.info(
            "request journal: sealed the periods a stopped writer left", directory=str(directory), periods=leftovers
        )
    return leftovers


def _seal(directory: Path, period: int) -> None:
    with contextlib.suppress(FileNotFoundError):  # the period had no rows (or its only write failed)
        os.rename(_path(directory, period, _OPEN), _path(directory, period, _SEALED))


def _periods(directory: Path, suffix: str) -> list[int]:
    found = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        stem = name.removesuffix(suffix)
        if stem != name and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def _path(directory: Path, period: int, suffix: str) -> Path:
    return directory / f"{period:016d}{suffix}"
