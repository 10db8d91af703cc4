"""The request log's write-ahead journal, and the hand-off of the edge's records to the log store: one file per period
of about a second, written through a shared mapping, which the delivery process takes into the log store once the
period is sealed. In the pipeline source → buffer → transform → sink (``docs/log-store.md``), this is the buffer's
first half: the edge worker (the source) hands its records over here, and a period leaves it only once committed to
the log store.

**Accepted means journalled.** The request log (``edgeplane.edge.request_log``) appends each request's record to the
period's file before its answer is handed to the socket. The file is mapped ``MAP_SHARED``: a store into the mapping
is a store into the kernel's page cache for the file, which outlives the process, so once the answer can leave, its
record survives a ``kill -9`` of the edge worker (or of ``edgeplane serve``, whose children then die), with no system
call per record. It does not survive the machine's crash until its period is committed to the log store (nothing is
synced per record; the commit is).

Why a hand-off rather than the store in the edge worker: turning rows into an Arrow record batch, serialising it and
writing it with the store's own thread cost the edge worker more than building the rows did, and all of that work can
wait a second and run in another process. So the edge worker only journals: the period's file is ``<period>.journal``
while it is written; at the end of the period (``RequestLog``: a second, or ``max_rows`` rows, or a full mapping) it is
**sealed**: unmapped, cut to the frames written, renamed ``<period>.sealed``, and never written again. The delivery
process (``edgeplane.logs.journal_intake``) takes the sealed files in order, commits their records to the worker's log
store (written and synced when the commit returns: the one durable hop), and deletes the files. The files a killed
worker left unsealed are sealed when a worker starts on the same journal (``RequestJournal``), or by the delivery
process for a partition no worker runs any more (``seal_leftovers``). A record whose period the store had committed when
the delivery process died is stored twice, never lost. The journal lives with the logs, not the edge, because both sides
use it: the edge writes it (``RequestJournal``), the delivery process reads it.

The file (format 4): a head of 8 bytes (``EPJ4`` and the format number), then frames, one after the other::

    <length: u32><kind: u32><payload: length bytes><commit word: u32 = COMMIT_MARK>, padded to 8 bytes

all integers in the machine's byte order (the file never leaves the machine before the intake reads it). The commit
word is written last; the file is made of zeros (written ahead, below), so a frame that a kill cut short has no commit
word, and the reader stops there: the record it held had not been answered. Kinds: a row (``ROW``: a shape number,
the packed numbers and the ray id, ``request_rows.ROW_PAYLOAD``), a shape (``SHAPE``: its texts, ``marshal``), a record
kept whole with its firewall events (``WHOLE``, ``marshal``). A shape's frame comes before the first row that names
it, so a row found after a crash always finds its shape. Files of the earlier format (chunks of ``marshal`` bytes
framed by length and CRC-32, written with ``write``) are still read: their chunks come back as ``CHUNK`` frames.

Zeros ahead: the period's file is written with zeros (``write``, ``ZEROS_AHEAD`` bytes at a time) before the
mapping's pages there are stored into. So a full disk is an error of that write (the records are then lost, logged
and counted, until a period can open again), never a ``SIGBUS`` on a store into the mapping; and a store faults in a
page that is already in the page cache, already allocated, which on ext4 costs a small fraction of the first store
into a page of a ``posix_fallocate``'d file (unwritten extents, converted then; ``docs/log-store.md`` has the
figures).
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import struct
import time
from pathlib import Path
from typing import Final

import structlog
from isal.isal_zlib import crc32  # the same CRC-32 as zlib's, many times faster
from prometheus_client import Counter

log = structlog.get_logger(__name__)

FORMAT: Final = 4
_FILE_HEAD: Final = struct.Struct("=4sI")  # magic, format
_MAGIC: Final = b"EPJ4"
FRAME_HEAD: Final = struct.Struct("=II")  # length, kind
COMMIT: Final = struct.Struct("=I")
COMMIT_MARK: Final = 0x214A5045  # "EPJ!": no byte of it zero, so a commit word cut short is not one
_ALIGN: Final = 8
# The kinds of frames (and ``CHUNK``: a chunk of a file of the earlier format, as ``read_sealed`` gives it).
CHUNK: Final = 0
ROW: Final = 1
SHAPE: Final = 2
WHOLE: Final = 3
KINDS: Final = frozenset((ROW, SHAPE, WHOLE))
ROWS: Final = 4  # not written: ``read_frames`` gives a run of row frames as one, whole (heads and commit words)
ROW_PAYLOAD_SIZE: Final = 92  # a row frame's payload (``request_rows.ROW_PAYLOAD``): every row frame is this long
ROW_FRAME_SIZE: Final = 104
_ROW_HEAD: Final = FRAME_HEAD.pack(ROW_PAYLOAD_SIZE, ROW)
_ROW_COMMIT: Final = COMMIT.pack(COMMIT_MARK)
_FIRST_WINDOW: Final = 4  # row frames a run is first checked for (``_committed_rows``)

_OLD_FRAME: Final = struct.Struct("<II")  # the earlier format's frames: length, CRC-32
_OPEN: Final = ".journal"  # a period being written
_SEALED: Final = ".sealed"  # a period written whole, for the delivery process to take
_QUARANTINED: Final = ".unreadable"  # a sealed period the delivery process could not take
PERIOD_BYTES: Final = 4 << 20  # the mapping of a period; a period that fills it is sealed and the next one opened
ZEROS_AHEAD: Final = 256 << 10  # how much of a period's file is written with zeros at a time, ahead of its frames
REOPEN_SECONDS: Final = 1.0  # after a period failed to open (a full disk), how long until the next try
JOURNAL_DROPPED_BYTES = Counter(
    "edgeplane_log_journal_dropped_bytes_total",
    "Bytes of request journal periods deleted untaken (the delivery process fell behind by more than the bound).",
)


def frame_size(payload_length: int) -> int:
    """The bytes a frame of a payload of this length takes in the file, padding included."""
    size = FRAME_HEAD.size + payload_length + COMMIT.size
    return size + (-size % _ALIGN)


class RequestJournal:
    """The journal an edge worker writes in ``directory``: the open period's mapping, and its seal.

    The request log writes frames itself (``append``, or on its hot path ``ROW_FRAME.pack_into(mapping, end, ...)``
    followed by ``end += ROW_FRAME.size``, when ``end + ROW_FRAME.size <= limit``): ``mapping``, ``end`` and
    ``limit`` (the end of the zeros written ahead; ``append`` writes more) are the open period's, and ``mapping`` is
    None (``limit`` 0) while no period is open."""

    def __init__(
        self, directory: Path, *, max_backlog_bytes: int | None = None, period_bytes: int = PERIOD_BYTES
    ) -> None:
        """Seals the files a process that did not stop cleanly left in ``directory``: no one writes them any more.
        ``max_backlog_bytes`` bounds the sealed periods that the delivery process has not taken yet (it is down, or
        cannot write the store), those found at start included: beyond it the oldest are deleted, with a warning."""
        self.directory = directory
        self.max_backlog_bytes = max_backlog_bytes
        self.period_bytes = period_bytes
        directory.mkdir(parents=True, exist_ok=True)
        seal_leftovers(directory)
        sealed = sealed_periods(directory)
        earlier = sealed + _periods(directory, _QUARANTINED)
        self.period = max(earlier) + 1 if earlier else 0  # the period new frames belong to: never a used number
        self.mapping: mmap.mmap | None = None  # the open period's
        self.end = 0  # where its next frame goes
        self.limit = 0  # where its zeros written ahead end (0: none open)
        self._size = 0  # its mapping's size
        self.open_errors = 0
        self._descriptor = -1
        self._failed_at = -REOPEN_SECONDS  # when a period last failed to open
        # The sealed periods that may not be taken yet, oldest first: (period, bytes); those found at start too.
        self._backlog: collections.deque[tuple[int, int]] = collections.deque()
        for period in sealed:
            with contextlib.suppress(OSError):
                self._backlog.append((period, sealed_path(directory, period).stat().st_size))
        self._backlog_bytes = sum(size for _period, size in self._backlog)

    def append(self, kind: int, payload: bytes) -> bool:
        """Appends one frame to the open period (opening one if none is), its commit word last. False when the
        open period has no room left for it (seal, and append to the next), or no period could be opened."""
        size = frame_size(len(payload))
        if self.mapping is None and not self.open(size):
            return False
        mapping, end = self.mapping, self.end
        assert mapping is not None
        if end + size > self.limit and not self._zeros_ahead(end + size):
            return False
        FRAME_HEAD.pack_into(mapping, end, len(payload), kind)
        start = end + FRAME_HEAD.size
        mapping[start : start + len(payload)] = payload
        COMMIT.pack_into(mapping, start + len(payload), COMMIT_MARK)
        self.end = end + size
        return True

    def scrub(self, start: int, size: int) -> None:
        """Zeroes what a frame whose writing failed (a number too large for its field) left at ``start``: the next
        frame is written there, and no stale byte may look like a commit word after it."""
        if self.mapping is not None:
            self.mapping[start : start + size] = bytes(size)

    def _zeros_ahead(self, needed: int) -> bool:
        """Writes zeros ahead up to ``needed`` bytes of the open period's file at least (``ZEROS_AHEAD`` at a time,
        within the mapping): False when the mapping is too small for it or the write fails (a full disk: logged)."""
        if needed > self._size:
            return False
        limit = min(self._size, max(needed, self.limit + ZEROS_AHEAD))
        try:
            os.pwrite(self._descriptor, bytes(limit - self.limit), self.limit)
        except OSError as error:
            self.open_errors += 1
            log.error("request journal: no room for more frames; the period ends here", error=str(error))
            self._size = self.limit  # the period is full: it is sealed, and the next one tried
            return False
        self.limit = limit
        return True

    def open(self, room: int = 0) -> bool:
        """Opens the current period's file and maps it (``period_bytes``, or more for a frame of ``room`` bytes);
        False when it cannot (a full disk: the error is logged, and the next try waits ``REOPEN_SECONDS``)."""
        if self.mapping is not None:
            return True
        now = time.monotonic()
        if now - self._failed_at < REOPEN_SECONDS:
            return False
        size = max(self.period_bytes, _FILE_HEAD.size + room)
        path = _path(self.directory, self.period, _OPEN)
        descriptor = -1
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            ahead = min(size, max(ZEROS_AHEAD, _FILE_HEAD.size + room))
            os.pwrite(descriptor, bytes(ahead), 0)  # zeros ahead (see the module): a full disk fails here
            os.ftruncate(descriptor, size)  # the rest a hole, mapped but not stored into until written with zeros
            mapping = mmap.mmap(descriptor, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as error:
            self.open_errors += 1
            self._failed_at = now
            log.error(
                "request journal: a period could not be opened; records are lost", path=str(path), error=str(error)
            )
            if descriptor >= 0:
                os.close(descriptor)
                with contextlib.suppress(OSError):
                    path.unlink()
            return False
        _FILE_HEAD.pack_into(mapping, 0, _MAGIC, FORMAT)
        self.mapping, self._descriptor = mapping, descriptor
        self.end, self.limit, self._size = _FILE_HEAD.size, ahead, size
        return True

    def seal(self) -> None:
        """Ends the current period: its file (if it has one) is unmapped, cut to its frames and sealed, and the next
        frame opens the next period's file."""
        mapping, end = self.mapping, self.end
        if mapping is not None:
            self.mapping, self.end, self.limit, self._size = None, 0, 0, 0
            mapping.close()
            try:
                os.ftruncate(self._descriptor, end)
            except OSError as error:  # its zeros are read as the end of its frames
                log.warning("request journal: a sealed period not cut to size", error=str(error))
            os.close(self._descriptor)
            self._descriptor = -1
            try:
                _seal(self.directory, self.period)
            except OSError as error:  # sealed by the next worker to start on this journal
                log.warning("request journal seal failed", period=self.period, error=str(error))
            else:
                try:
                    self._bound_backlog(self.period, end)
                except OSError as error:  # tried again at the next seal
                    log.warning("request journal backlog not trimmed", error=str(error))
        self.period += 1

    def close(self) -> None:
        """Unmaps and closes the open period's file, unsealed (call ``seal`` first to hand its records over)."""
        if self.mapping is not None:
            self.mapping.close()
            os.close(self._descriptor)
            self.mapping, self._descriptor, self.end, self.limit, self._size = None, -1, 0, 0, 0

    def _bound_backlog(self, period: int, size: int) -> None:
        """Counts a sealed period in the backlog, forgets those taken since (the oldest first: the delivery process
        takes them in order), and deletes the oldest while the rest is over ``max_backlog_bytes``."""
        backlog = self._backlog
        backlog.append((period, size))
        self._backlog_bytes += size
        while backlog and not sealed_path(self.directory, backlog[0][0]).exists():
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


def read_frames(data: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """The committed frames of a period's bytes, as ``(kind, payload)``, and the offset where they end: reading stops
    at the first frame without its commit word (a kill cut it short), that does not fit in ``data`` or whose kind is
    unknown. Row frames that follow one another come as one ``(ROWS, their whole frames)``. A file of the earlier
    format gives its chunks as ``CHUNK`` frames (up to the first frame cut short or failing its CRC)."""
    if len(data) < _FILE_HEAD.size or _FILE_HEAD.unpack_from(data, 0) != (_MAGIC, FORMAT):
        return _read_chunks(data)
    frames: list[tuple[int, bytes]] = []
    offset = _FILE_HEAD.size
    head_size, commit_size = FRAME_HEAD.size, COMMIT.size
    while offset + head_size + commit_size <= len(data):
        length, kind = FRAME_HEAD.unpack_from(data, offset)
        if kind == ROW:
            count = _committed_rows(data, offset) if length == ROW_PAYLOAD_SIZE else 0
            if not count:
                break
            frames.append((ROWS, data[offset : offset + count * ROW_FRAME_SIZE]))
            offset += count * ROW_FRAME_SIZE
            continue
        start = offset + head_size
        if kind not in KINDS or start + length + commit_size > len(data):
            break
        if COMMIT.unpack_from(data, start + length)[0] != COMMIT_MARK:
            break
        frames.append((kind, data[start : start + length]))
        offset = min(offset + frame_size(length), len(data))  # a file cut in the last frame's padding
    return frames, offset


def _committed_rows(data: bytes, offset: int) -> int:
    """How many whole row frames follow one another from ``offset``: a run ends at the first frame that is not a
    row's or has no commit word. Checked by strided views over the run (the rows are most of a period), not frame
    by frame, in windows that double from ``_FIRST_WINDOW`` frames: a run costs in proportion to its own length,
    not to the rest of the file (a period where every request has a shape of its own is runs of one row)."""
    available = (len(data) - offset) // ROW_FRAME_SIZE
    found = 0
    window = _FIRST_WINDOW
    while found < available:
        count = min(window, available - found)
        start = offset + found * ROW_FRAME_SIZE
        run = memoryview(data)[start : start + count * ROW_FRAME_SIZE]
        heads = run.cast("Q")[0 :: ROW_FRAME_SIZE // 8].tobytes()
        commits = run.cast("I")[ROW_FRAME_SIZE // 4 - 1 :: ROW_FRAME_SIZE // 4].tobytes()
        same = min(
            _same_prefix(heads, _ROW_HEAD * count, FRAME_HEAD.size),
            _same_prefix(commits, _ROW_COMMIT * count, COMMIT.size),
        )
        found += same
        if same < count:
            break
        window *= 2
    return found


def _same_prefix(found: bytes, expected: bytes, unit: int) -> int:
    """How many ``unit``-byte items ``found`` and ``expected`` (of equal length) share from the start."""
    if found == expected:
        return len(found) // unit
    same, differs = 0, len(found) // unit  # the first ``same`` items are equal; the first ``differs`` are not
    while differs - same > 1:
        middle = (same + differs) // 2
        if found[: middle * unit] == expected[: middle * unit]:
            same = middle
        else:
            differs = middle
    return same


def _read_chunks(data: bytes) -> tuple[list[tuple[int, bytes]], int]:
    frames: list[tuple[int, bytes]] = []
    offset = 0
    while offset + _OLD_FRAME.size <= len(data):
        length, crc = _OLD_FRAME.unpack_from(data, offset)
        payload = data[offset + _OLD_FRAME.size : offset + _OLD_FRAME.size + length]
        if len(payload) != length or crc32(payload) != crc:
            break
        frames.append((CHUNK, payload))
        offset += _OLD_FRAME.size + length
    return frames, offset


def sealed_periods(directory: Path) -> list[int]:
    """The sealed periods in a journal directory, oldest first."""
    return _periods(directory, _SEALED)


def sealed_path(directory: Path, period: int) -> Path:
    """The file of a sealed period."""
    return _path(directory, period, _SEALED)


def read_sealed(directory: Path, period: int) -> list[tuple[int, bytes]]:
    """The committed frames of a sealed period (``read_frames``); a torn tail is logged."""
    try:
        data = sealed_path(directory, period).read_bytes()
    except FileNotFoundError:
        return []
    frames, end = read_frames(data)
    if data[end:].strip(b"\x00"):
        log.warning(
            "request journal: a torn frame ends the period", directory=str(directory), period=period, offset=end
        )
    return frames


def sealed_identity(directory: Path, period: int) -> int:
    """What tells a sealed period apart from an earlier one of the same number (a worker that finds its journal
    empty numbers its periods from 0 again): its file's modification time in nanoseconds, which no longer changes
    once the period is sealed. Raises ``FileNotFoundError`` when the period is gone."""
    return sealed_path(directory, period).stat().st_mtime_ns


def delete_sealed(directory: Path, period: int) -> None:
    """Deletes a sealed period's file, once its rows are in the log store."""
    sealed_path(directory, period).unlink(missing_ok=True)


def quarantine(directory: Path, period: int) -> None:
    """Renames a sealed period the intake cannot take to ``<period>.unreadable``, kept for inspection."""
    os.rename(sealed_path(directory, period), _path(directory, period, _QUARANTINED))


def seal_leftovers(directory: Path) -> list[int]:
    """Seals every period still open in ``directory``, whose writer is gone, cut to its committed frames (a frame
    its writer was killed in the middle of is dropped: its answer was never sent); returns those periods."""
    leftovers = _periods(directory, _OPEN)
    for period in leftovers:
        path = _path(directory, period, _OPEN)
        with contextlib.suppress(FileNotFoundError):
            _frames, end = read_frames(path.read_bytes())
            os.truncate(path, end)
        _seal(directory, period)
    if leftovers:
        log.info(
            "request journal: sealed the periods a stopped writer left", directory=str(directory), periods=leftovers
        )
    return leftovers


def _seal(directory: Path, period: int) -> None:
    with contextlib.suppress(FileNotFoundError):  # the period had no frames
        os.rename(_path(directory, period, _OPEN), sealed_path(directory, period))


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
