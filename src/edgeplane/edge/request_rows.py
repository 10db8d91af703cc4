"""The ``http_requests`` rows of answered requests, kept so that adding one, journalling them and turning them into a
record batch all cost little.

A request's texts (client address, host, method, path, query, protocol, user agent, referer, ``X-Requested-With``,
content type, edge address, country, ASN, zone, cache status) repeat from one request to the next, so a row keeps
them as the number of a **shape**: the tuple of those values, numbered once per journal period. Its numbers
(port, sizes, status, timestamps, origin status and duration) are packed as machine integers (``struct``) onto one
byte array, a row after the other; its shape's number (a 32-bit machine integer) and its ray id (ASCII, then a newline)
go to two more byte arrays, so that no Python object is kept per row (packing all the numbers at once: appending each
to an ``array('q')`` of its own cost twice as much as the rest of the row; a list of ray ids kept every ray id's
string alive until the journal's look, and ``marshal`` then read them all again). The journal takes the new bytes as
they are; the record batch copies the numbers into columns (strided slices, in C) and takes them as Arrow buffers.
The texts become columns once per shape and are spread over the rows by an Arrow ``take``.

Written here rather than with a library: the work is a fixed mapping from the edge's own objects to the dataset's
columns; the standard ``struct``, ``array`` and ``marshal`` modules and Arrow's buffers and kernels do all of the
generic part. The vectorised arithmetic uses Arrow's compute functions, so no further dependency is needed.

In C, when it was compiled: ``add_answers`` hands its batch to ``row_builder`` (``row_builder.c``) first, which adds
the rows of the ordinary answers exactly as the loop here would (the same shape tuples, numbers and ray ids, in the
same dictionary, list and byte arrays) and gives back the others, in order, for the loop. In the interpreter the
loop took about 7,100 instructions a row, in C about 850; paired at concurrency 16 that is 1.2 µs less CPU per
request, more than half of what logging cost the edge (``docs/benchmarks.md``). Without a compiler at install time
the module is not built and the loop does every row; ``tests/edge/test_row_builder.py`` holds the two to the same
records.

Rows that do not fit (a number beyond 64 bits, a value of another type) and rows of requests with a firewall verdict
(the firewall matched them: they carry ``Security*`` fields; or their attack scores were computed) are kept whole, as
the store's dictionaries (``odd``, filled by the caller with ``record_of``); so are the ``firewall_events`` records of
the matches (``events``). They are rare, and go to the store beside the batch. So every row of the batch is of a
request that was not scored, and its ``WAF*AttackScore`` fields are 100 (``UNSCORED``), as ``record_of`` gives them
until the caller sets the scores.
"""

from __future__ import annotations

import marshal
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.edge.exchange import NOT_LOGGED, Exchange
from edgeplane.edge.http_server import (
    NOTED_HEADERS,
    REFERER,
    REQUESTED_WITH,
    USER_AGENT,
    Answer,
    EdgeRequest,
    EdgeResponse,
)
from edgeplane.store.snapshot import ZoneRoute
from edgeplane.waf.events import attack_score_fields
from edgeplane.waf.firewall import ALLOWED

row_builder: ModuleType | None
try:  # the loop of ``add_answers`` in C (``row_builder.c``), built when a C compiler was at hand at install time
    from edgeplane.edge import row_builder as _compiled
except ImportError:  # pragma: no cover - installed without a compiler: the Python loop does all the work
    row_builder = None
else:
    _compiled.setup(
        EdgeRequest, EdgeResponse, Exchange, ZoneRoute, ALLOWED, len(NOTED_HEADERS), USER_AGENT, REFERER, REQUESTED_WITH
    )
    row_builder = _compiled

# The numeric fields of a row, in the order ``RequestRows.add`` appends them; -1 is a missing origin value.
NUMBER_COLUMNS: Final = (
    "ClientSrcPort",
    "ClientRequestBytes",
    "EdgeResponseStatus",
    "EdgeResponseBodyBytes",
    "EdgeResponseBytes",
    "EdgeStartTimestamp",
    "EdgeEndTimestamp",
    "OriginResponseStatus",
    "OriginResponseDurationMs",
)
_MISSING_WHEN_NEGATIVE: Final = ("OriginResponseStatus", "OriginResponseDurationMs")
# Fields every row has the same value of, and fields that repeat another field of the row (the edge serves the host
# the client asked for).
CONSTANTS: Final = {"ClientRequestScheme": "http", "ClientRequestSource": "eyeball"}
UNSCORED: Final = attack_score_fields(None)  # the attack scores of a request that was not scored: 100
COPIES: Final = {"EdgeRequestHost": "ClientRequestHost"}
_PROTOCOLS: Final = {"1.1": "HTTP/1.1", "1.0": "HTTP/1.0"}
_JOURNAL_FORMAT: Final = 3
_FIRST_JOURNAL_FORMAT: Final = 1  # numbers a column at a time; still read
_JOURNAL_FORMATS: Final = (_JOURNAL_FORMAT, 2, _FIRST_JOURNAL_FORMAT)  # 1 and 2: the ray ids as a list; still read
# The ray ids of a chunk are one string, separated by this (a ray id is hex digits). Written as a list, they cost
# marshal more than everything else in the chunk: it looks each string up in its table of shared objects.
_RAY_SEPARATOR: Final = "\n"
_RAY_END: Final = b"\n"

# A shape: the texts of a row, in this order (bytes as the request had them, decoded once per shape).
SHAPE: Final = (
    "client IP (str)",
    "host (str)",
    "method (str)",
    "path (str)",
    "query (bytes)",
    "HTTP version (str)",
    "User-Agent (bytes or None)",
    "Referer (bytes or None)",
    "X-Requested-With (bytes or None)",
    "content type of the answer (bytes)",
    "the edge's address ((str, int) or None)",
    "country (str, empty when unknown)",
    "ASN (int, 0 when unknown)",
    "zone name (str, empty without a zone)",
    "cache status (str)",
)
Shape = tuple[Any, ...]
# An answer ``RequestRows.add_answers`` did not add, with its exchange and its row's shape and numbers: the caller
# keeps it whole.
Leftover = tuple[Answer, Exchange, Shape, tuple[int, ...]]


def _header_text(value: bytes | None) -> str:
    return value.decode("latin-1") if value else ""


def _uri(shape: Shape) -> str:
    path: str = shape[3]
    query: bytes = shape[4]
    return path + "?" + query.decode("latin-1") if query else path


# The text columns of a row: each field's type and its value for a shape.
SHAPE_COLUMNS: Final[dict[str, tuple[pa.DataType, Callable[[Shape], Any]]]] = {
    "ClientIP": (pa.string(), lambda shape: shape[0]),
    "ClientRequestHost": (pa.string(), lambda shape: shape[1]),
    "ClientRequestMethod": (pa.string(), lambda shape: shape[2]),
    "ClientRequestPath": (pa.string(), lambda shape: shape[3]),
    "ClientRequestURI": (pa.string(), _uri),
    "ClientRequestProtocol": (pa.string(), lambda shape: protocol(shape[5])),
    "ClientRequestUserAgent": (pa.string(), lambda shape: _header_text(shape[6])),
    "ClientRequestReferer": (pa.string(), lambda shape: _header_text(shape[7])),
    "ClientXRequestedWith": (pa.string(), lambda shape: _header_text(shape[8])),
    "EdgeResponseContentType": (pa.string(), lambda shape: shape[9].decode("latin-1")),
    "EdgeServerIP": (pa.string(), lambda shape: shape[10][0] if shape[10] else ""),
    "ClientCountry": (pa.string(), lambda shape: shape[11] or None),
    "ClientASN": (pa.int64(), lambda shape: shape[12] or None),
    "ZoneName": (pa.string(), lambda shape: shape[13]),
    "CacheCacheStatus": (pa.string(), lambda shape: shape[14]),
}


# A row's numbers, packed: machine integers in the order of ``NUMBER_COLUMNS`` (native order, standard sizes, as
# ``array("q")`` holds them).
_NUMBERS: Final = struct.Struct(f"={len(NUMBER_COLUMNS)}q")
_SHAPE_NUMBER: Final = struct.Struct("I")  # native, as row_builder.c writes it (and memoryview casts, "I")


@dataclass(slots=True)
class Chunk:
    """What ``RequestRows`` gained since the last chunk: the journal's unit (``encode`` / ``decode``)."""

    count: int  # rows in the packed numbers
    shapes: list[Shape]  # the shapes first used by these rows, numbered on from the earlier chunks of the period
    shape_numbers: bytes | bytearray  # each row's shape number, a native 32-bit unsigned integer
    rays: str  # the rows' ray ids, each followed by a newline
    numbers: bytes | bytearray  # the rows' numbers, packed one row after the other
    odd: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def encode(self) -> bytes:
        return marshal.dumps(
            (
                _JOURNAL_FORMAT,
                self.count,
                self.shapes,
                self.shape_numbers,
                self.rays[:-1],  # one string, separated: marshal refers to each string of a list by identity
                self.numbers,
                self.odd,
                self.events,
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> Chunk:
        """Raises ``ValueError`` for bytes that are not a chunk ``encode`` wrote (this version's, or the first
        version's, whose numbers were a column at a time)."""
        try:
            version, count, shapes, shape_numbers, rays, numbers, odd, events = marshal.loads(data)  # noqa: S302  # our own journal, in the data directory
            if version == _FIRST_JOURNAL_FORMAT and len(numbers) == len(NUMBER_COLUMNS):
                numbers = _interleaved(numbers, count)
            if version != _JOURNAL_FORMAT:  # 1 and 2: a list
                rays = _RAY_SEPARATOR.join(rays) if isinstance(rays, list) and all(map(_plain_ray, rays)) else None
            rays = rays + _RAY_SEPARATOR if count and isinstance(rays, str) else rays
        except (AttributeError, EOFError, TypeError, ValueError) as error:
            raise ValueError(f"not a request journal chunk: {error}") from None
        if version not in _JOURNAL_FORMATS or not isinstance(rays, str) or rays.count(_RAY_SEPARATOR) != count:
            raise ValueError("not a request journal chunk of a known version")
        if not isinstance(numbers, bytes) or len(numbers) != count * _NUMBERS.size:
            raise ValueError("a request journal chunk whose numbers do not match its rows")
        if not isinstance(shape_numbers, bytes) or len(shape_numbers) != count * array("I").itemsize:
            raise ValueError("a request journal chunk whose shape numbers do not match its rows")
        return cls(count, shapes, shape_numbers, rays, numbers, odd, events)


def _plain_ray(ray: object) -> bool:
    """Whether a ray id can be journalled between separators."""
    return isinstance(ray, str) and _RAY_SEPARATOR not in ray


def _interleaved(columns: list[bytes], count: int) -> bytes:
    """The numbers of the first journal format (a column at a time) packed a row at a time."""
    rows = array("q", bytes(count * _NUMBERS.size))
    for index, data in enumerate(columns):
        column = array("q", data)
        if len(column) != count:
            raise ValueError("a column of the wrong length")
        rows[index :: len(columns)] = column
    return rows.tobytes()


class RequestRows:
    """The rows of one journal period (see the module docstring). In the edge worker: ``add_answers``, and
    ``take_chunk`` for the journal as often as wanted; the next period has a new ``RequestRows``, since shapes are
    numbered per period. In the delivery process: ``extend`` with the period's chunks, then ``batch`` (or
    ``records``) once."""

    def __init__(self) -> None:
        self._last: list[Any] = [None, 0]  # the shape of the row ``row_builder`` added last, and its number
        self._shapes: dict[Shape, int] = {}
        self._shape_list: list[Shape] = []
        self._shape_numbers = bytearray()  # every row's shape number, packed (``_SHAPE_NUMBER``)
        self._rays = bytearray()  # every row's ray id, UTF-8, each followed by a newline
        self._numbers = bytearray()  # every row's numbers, packed (``_NUMBERS``)
        self.odd: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._shapes_chunked = 0  # shapes already in a chunk

    def __len__(self) -> int:
        return len(self._shape_numbers) // _SHAPE_NUMBER.size + len(self.odd)

    def add_answers(self, answers: list[Answer]) -> tuple[list[Leftover], list[Answer]]:
        """Adds a row for each answer whose request has a started ``Exchange``. Returns the answers it did not add:
        those to keep whole, with their exchange, shape and numbers (the firewall matched them, or a number is no
        64-bit integer), for the caller to build; and those whose exchange was not started (none, or no ray id),
        for the caller to start and add again. Requests marked ``NOT_LOGGED`` are skipped.

        The ordinary rows are added by ``row_builder`` when it was compiled; the loop here adds the rest (all of
        them without it) and is the reference the C module is tested against (see the module docstring)."""
        shapes, shape_list, shape_numbers, rays, packed = (
            self._shapes,
            self._shape_list,
            self._shape_numbers,
            self._rays,
            self._numbers,
        )
        pack, pack_shape_number = _NUMBERS.pack, _SHAPE_NUMBER.pack
        leftovers: list[Leftover] = []
        unstarted: list[Answer] = []
        if row_builder is not None:  # it adds the ordinary rows and leaves the rest to the loop below
            answers = row_builder.add_answers(answers, shapes, shape_list, shape_numbers, rays, packed, self._last)
        for answer in answers:
            request, response, _sent_bytes, _written_ns = answer
            exchange: Exchange = request.context  # type: ignore[assignment]  # checked on the next line
            if exchange.__class__ is not Exchange or not exchange.ray_id:  # a class check costs less than isinstance
                if exchange is not NOT_LOGGED:
                    unstarted.append(answer)
                continue
            client, noted, zone = request.client, request.noted, exchange.zone
            shape = (
                client[0] if client else "",
                exchange.host,
                request.method,
                request.path,
                request.query_string,
                request.http_version,
                noted[USER_AGENT],
                noted[REFERER],
                noted[REQUESTED_WITH],
                response.content_type,
                request.server,
                exchange.country,
                exchange.asn,
                zone.zone_name if zone else "",
                exchange.cache_status,
            )
            numbers = numbers_of(answer, exchange)
            if exchange.verdict is not ALLOWED or not _plain_ray(exchange.ray_id):  # rare: a match, scores, an odd id
                leftovers.append((answer, exchange, shape, numbers))
                continue
            try:
                row = pack(*numbers)
            except struct.error:
                leftovers.append((answer, exchange, shape, numbers))
                continue
            number = shapes.get(shape)
            if number is None:
                number = shapes[shape] = len(shape_list)
                shape_list.append(shape)
            packed += row
            shape_numbers += pack_shape_number(number)
            rays += exchange.ray_id.encode() + _RAY_END
        return leftovers, unstarted

    def take_chunk(self) -> Chunk | None:
        """What was added since the last chunk, which the rows then forget (the shapes they keep, numbered on);
        None when nothing was added."""
        shape_numbers, odd = self._shape_numbers, self.odd
        shapes = len(self._shape_list)
        if not (shape_numbers or odd or self.events) and shapes == self._shapes_chunked:
            return None
        chunk = Chunk(
            len(shape_numbers) // _SHAPE_NUMBER.size,
            self._shape_list[self._shapes_chunked :],
            shape_numbers,  # the chunk takes the byte arrays: no copy
            self._rays.decode(),
            self._numbers,
            odd,
            self.events,
        )
        self._shapes_chunked = shapes
        self._shape_numbers, self._rays, self._numbers = bytearray(), bytearray(), bytearray()
        self.odd, self.events = [], []
        return chunk

    def extend(self, chunk: Chunk) -> None:
        """Adds the rows of a journalled chunk (the intake): chunks of one period, in the order they were taken."""
        for shape in chunk.shapes:
            self._shapes[shape] = len(self._shape_list)
            self._shape_list.append(shape)
        numbers = memoryview(chunk.shape_numbers).cast("I")
        if numbers and max(numbers) >= len(self._shape_list):
            raise ValueError("a request journal chunk names a shape no earlier chunk of its period has")
        self._shape_numbers += chunk.shape_numbers
        self._rays += chunk.rays.encode()
        self._numbers += chunk.numbers
        self.odd.extend(chunk.odd)
        self.events.extend(chunk.events)

    def _columns(self) -> list[array[int]]:
        """The packed numbers, a column per ``NUMBER_COLUMNS`` (strided copies, in C)."""
        rows, width = array("q", self._numbers), len(NUMBER_COLUMNS)
        return [rows[index::width] for index in range(width)]

    def batch(self) -> pa.RecordBatch | None:
        """The rows in the packed numbers (not ``odd``) as one record batch of ``http_requests`` fields, None when
        there are none. Columns of nulls are left out. Raises ``pa.ArrowInvalid``, ``pa.ArrowTypeError`` or
        ``UnicodeError`` for a text Arrow cannot hold (``records`` then gives the rows)."""
        count = len(self._shape_numbers) // _SHAPE_NUMBER.size
        if not count:
            return None
        names: list[str] = ["RayID"]
        arrays: list[pa.Array] = [pa.array(self._ray_ids(), pa.string())]
        indices = pa.Array.from_buffers(pa.uint32(), count, [None, pa.py_buffer(self._shape_numbers)])
        shapes = self._shape_list
        for name, (type_, value_of) in SHAPE_COLUMNS.items():
            column = pa.array([value_of(shape) for shape in shapes], type_)
            if column.null_count == len(column):
                continue
            names.append(name)
            arrays.append(pa.repeat(column[0], count) if len(shapes) == 1 else column.take(indices))
        numbers = {
            name: pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(column)])
            for name, column in zip(NUMBER_COLUMNS, self._columns(), strict=True)
        }
        for name in _MISSING_WHEN_NEGATIVE:
            missing = pc.less(numbers[name], 0)
            if pc.all(missing).as_py():
                del numbers[name]
            else:
                numbers[name] = pc.if_else(missing, pa.scalar(None, pa.int64()), numbers[name])
        elapsed = pc.subtract(numbers["EdgeEndTimestamp"], numbers["EdgeStartTimestamp"])
        numbers["EdgeTimeToFirstByteMs"] = pc.max_element_wise(pc.divide(elapsed, 1_000_000), 0)
        names.extend(numbers)
        arrays.extend(numbers.values())
        for name, value in CONSTANTS.items():
            names.append(name)
            arrays.append(pa.repeat(pa.scalar(value, pa.string()), count))
        for name, score in UNSCORED.items():
            names.append(name)
            arrays.append(pa.repeat(pa.scalar(score, pa.int64()), count))
        for name, original in COPIES.items():
            names.append(name)
            arrays.append(arrays[names.index(original)])
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def records(self) -> list[dict[str, Any]]:
        """The rows in the packed numbers as the store's dictionaries, for when ``batch`` cannot hold them: the same
        records, one Python object per field (``record_of``)."""
        shapes = self._shape_list
        return [
            record_of(shapes[shape_number], ray_id, numbers)
            for shape_number, ray_id, numbers in zip(
                memoryview(self._shape_numbers).cast("I"),
                self._ray_ids(),
                _NUMBERS.iter_unpack(self._numbers),
                strict=True,
            )
        ]

    def _ray_ids(self) -> list[str]:
        return self._rays[:-1].decode().split(_RAY_SEPARATOR) if self._rays else []


def numbers_of(answer: Answer, exchange: Exchange) -> tuple[int, ...]:
    """The numbers of an answer's row, in the order of ``NUMBER_COLUMNS``, as ``add_answers``'s Python loop packs
    them (``row_builder.c`` packs the same values for the ordinary rows)."""
    request, response, sent_bytes, written_ns = answer
    origin_status, origin_duration_ms = exchange.origin_status, exchange.origin_duration_ms
    return (
        request.client[1] if request.client else 0,
        request.content_length,
        response.status,
        len(response.body),
        sent_bytes,
        exchange.started_ns,
        written_ns,
        -1 if origin_status is None else origin_status,
        -1 if origin_duration_ms is None else origin_duration_ms,
    )


def record_of(shape: Shape, ray_id: str, numbers: tuple[int, ...]) -> dict[str, Any]:
    """A row as the store's dictionary (a missing value left out): the form of the rows kept whole, and of the rows
    no batch holds."""
    record: dict[str, Any] = {"RayID": ray_id}
    for name, (_type, value_of) in SHAPE_COLUMNS.items():
        value = value_of(shape)
        if value is not None:
            record[name] = value
    for name, value in zip(NUMBER_COLUMNS, numbers, strict=True):
        if value >= 0 or name not in _MISSING_WHEN_NEGATIVE:
            record[name] = value
    record["EdgeTimeToFirstByteMs"] = max(0, (record["EdgeEndTimestamp"] - record["EdgeStartTimestamp"]) // 1_000_000)
    record |= CONSTANTS
    record |= UNSCORED
    for name, original in COPIES.items():
        record[name] = record[original]
    return record


def protocol(http_version: str) -> str:
    """The ``ClientRequestProtocol`` of an HTTP version as the parser gives it (``1.1``)."""
    return _PROTOCOLS.get(http_version) or f"HTTP/{http_version}"
