"""The ``http_requests`` rows of answered requests: their form in the request journal, and the record batch the
delivery process makes of a journal period.

A request's texts (client address, host, method, path, query, protocol, user agent, referer, ``X-Requested-With``,
content type, edge address, country, ASN, zone, cache status, and the JSON-RPC network, method, request count and
error code, and the upstream that answered) repeat from one request to the next, so a row keeps them
as the number of a **shape**: the tuple of those values (``SHAPE``), numbered once per journal period, whose frame the
journal holds before the first row that names it. A row is then one fixed-size frame (``ROW_FRAME``): the shape's
number, the numbers (port, sizes, status, timestamps, origin status and duration) as machine integers, and the ray id,
written by ``edgeplane.edge.request_log`` with one ``pack_into`` into the journal's mapping, its commit word last. The
delivery process reads a period's frames back into ``RequestRows`` (``add_frame``): the shape numbers, numbers and ray
ids onto three byte arrays, which the record batch takes as Arrow buffers (the numbers as columns by strided slices,
in C); the texts become columns once per shape and are spread over the rows by an Arrow ``take``. Periods of the
earlier journal format are read as ``Chunk``s.

Written here rather than with a library: the work is a fixed mapping from the edge's own objects to the dataset's
columns; the standard ``struct``, ``array`` and ``marshal`` modules and Arrow's buffers and kernels do all of the
generic part. The vectorised arithmetic uses Arrow's compute functions, so no further dependency is needed.

Rows that do not fit (a number beyond 64 bits, a value of another type) and rows of requests with a firewall verdict
(the firewall matched them: they carry ``Security*`` fields; or their attack scores were computed) are kept whole, as
the store's dictionaries (``whole_records``, filled by the caller with ``record_of``); so are the
``firewall_events`` records of the matches (``events``). They are rare, and go to the store beside the batch. So
every row of the batch is of a request that was not scored, and its ``WAF*AttackScore`` fields are 100
(``UNSCORED``), as ``record_of`` gives them until the caller sets the scores.
"""

from __future__ import annotations

import marshal
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs import request_journal
from edgeplane.waf.events import attack_score_fields

HTTP_REQUESTS: Final = "http_requests"

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
    "network of /v1/<network> (str, empty for another path)",
    "JSON-RPC method, a batch's first (str, empty when none was read)",
    "JSON-RPC requests in the body (int: 1, a batch's size, 0 when not read as JSON-RPC)",
    "JSON-RPC error code of the answer, its first (int or None)",
    "upstream node that answered, its label (str, empty when none did)",
)
# The shape's members added after journal format 4 was first written, with the values of a shape written without
# them (a period journalled before an upgrade).
_LATER_MEMBERS: Final = ("", "", 0, None, "")
_FIRST_SHAPE_SIZE: Final = len(SHAPE) - len(_LATER_MEMBERS)
Shape = tuple[Any, ...]


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
    "Web3Network": (pa.string(), lambda shape: shape[15] or None),
    "JSONRPCMethod": (pa.string(), lambda shape: shape[16] or None),
    "JSONRPCRequests": (pa.int64(), lambda shape: shape[17] or None),
    "JSONRPCErrorCode": (pa.int64(), lambda shape: shape[18]),
    "Web3Upstream": (pa.string(), lambda shape: shape[19] or None),
}


# A row's numbers, packed: machine integers in the order of ``NUMBER_COLUMNS`` (native order, standard sizes, as
# ``array("q")`` holds them).
_NUMBERS: Final = struct.Struct(f"={len(NUMBER_COLUMNS)}q")
_SHAPE_NUMBER: Final = struct.Struct("=I")  # as memoryview casts "I"
_RAY_BYTES: Final = 16  # a ray id in a row: 16 hex digits (``new_ray_id``); rows of others are kept whole
# A row in the journal: the numbers, the ray id, the shape's number. The numbers and the ray id fall on 8-byte
# boundaries of the frame (after its 8-byte head), so that the intake takes a run of rows apart by strided views.
ROW_PAYLOAD: Final = struct.Struct(f"={len(NUMBER_COLUMNS)}q{_RAY_BYTES}sI")
# A row's whole frame (``request_journal``): length and kind, the payload, the commit word, in the order
# ``pack_into`` writes them, so that one call writes the frame and its commit word last.
ROW_FRAME: Final = struct.Struct(f"=II{ROW_PAYLOAD.format[1:]}I")
_WORDS: Final = ROW_FRAME.size // 8  # a row frame in 64-bit words: head, nine numbers, two of ray id, the rest
_RAY_WORD: Final = 1 + len(NUMBER_COLUMNS)
_SHAPE_WORD32: Final = 2 * (_RAY_WORD + 2)  # the shape number, in 32-bit words
assert ROW_FRAME.size == request_journal.ROW_FRAME_SIZE == request_journal.frame_size(ROW_PAYLOAD.size)


@dataclass(slots=True)
class Chunk:
    """The unit of the earlier journal format (format 3 and before: the rows gained since the last ``write``,
    ``marshal``'d). Edge workers no longer write it; the intake still reads it (``decode``), and ``encode`` makes
    it for tests of that."""

    count: int  # rows in the packed numbers
    shapes: list[Shape]  # the shapes first used by these rows, numbered on from the earlier chunks of the period
    shape_numbers: bytes | bytearray  # each row's shape number, a native 32-bit unsigned integer
    rays: str  # the rows' ray ids, each followed by a newline
    numbers: bytes | bytearray  # the rows' numbers, packed one row after the other
    whole_records: list[dict[str, Any]] = field(default_factory=list)
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
                self.whole_records,
                self.events,
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> Chunk:
        """Raises ``ValueError`` for bytes that are not a chunk ``encode`` wrote (this version's, or the first
        version's, whose numbers were a column at a time)."""
        try:
            version, count, shapes, shape_numbers, rays, numbers, whole_records, events = marshal.loads(data)  # noqa: S302  # our own journal, in the data directory
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
        return cls(count, shapes, shape_numbers, rays, numbers, whole_records, events)


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
    """The rows of one journal period, in the delivery process (see the module docstring): ``add_frame`` with each
    of the period's frames, in order, then ``batch`` (or ``records``) once."""

    def __init__(self) -> None:
        self._shapes: dict[Shape, int] = {}
        self._shape_list: list[Shape] = []
        self._shape_numbers = bytearray()  # every row's shape number, packed (``_SHAPE_NUMBER``)
        self._rays = bytearray()  # every row's ray id, UTF-8, 16 bytes
        self._numbers = bytearray()  # every row's numbers, packed (``_NUMBERS``, as in ``ROW_PAYLOAD``)
        self.whole_records: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._shape_numbers) // _SHAPE_NUMBER.size + len(self.whole_records)

    def add_frame(self, kind: int, payload: bytes) -> None:
        """Adds a frame of a journal period (``request_journal.read_sealed``), in the order written. Raises
        ``ValueError`` for a frame that cannot be read (the rest of its period is then skipped)."""
        if kind == request_journal.ROWS:
            self._add_rows(payload)
        elif kind == request_journal.SHAPE:
            self._add_shape(_loads(payload))
        elif kind == request_journal.WHOLE:
            whole = _loads(payload)
            if not (isinstance(whole, tuple) and len(whole) == 2 and isinstance(whole[0], dict)):
                raise ValueError("a request journal record of the wrong form")
            self.whole_records.append(whole[0])
            self.events.extend(whole[1])
        elif kind == request_journal.CHUNK:
            self.extend(Chunk.decode(payload))
        else:
            raise ValueError(f"a request journal frame of unknown kind {kind}")

    def _add_rows(self, frames: bytes) -> None:
        """Adds a run of whole row frames: their shape numbers, numbers and ray ids taken out by strided views."""
        count, rest = divmod(len(frames), ROW_FRAME.size)
        if rest or not count:
            raise ValueError("a request journal run of rows of the wrong size")
        words, words32 = memoryview(frames).cast("q"), memoryview(frames).cast("I")
        shape_numbers = words32[_SHAPE_WORD32 :: 2 * _WORDS]
        if max(shape_numbers) >= len(self._shape_list):
            raise ValueError("a request journal row names a shape its period does not have")
        width = len(NUMBER_COLUMNS)
        numbers = bytearray(count * _NUMBERS.size)
        packed = memoryview(numbers).cast("q")
        for index in range(width):
            packed[index::width] = words[1 + index :: _WORDS]
        rays = bytearray(count * _RAY_BYTES)
        ray_words = memoryview(rays).cast("q")
        ray_words[0::2] = words[_RAY_WORD::_WORDS]
        ray_words[1::2] = words[_RAY_WORD + 1 :: _WORDS]
        self._shape_numbers += shape_numbers.tobytes()
        self._numbers += numbers
        self._rays += rays

    def _add_shape(self, shape: object) -> None:
        """Numbers a shape of the period, the next number; one written before the later members gets their values
        (``_LATER_MEMBERS``)."""
        if isinstance(shape, tuple) and len(shape) == _FIRST_SHAPE_SIZE:
            shape += _LATER_MEMBERS
        if not isinstance(shape, tuple) or len(shape) != len(SHAPE):
            raise ValueError("a request journal shape of the wrong form")
        self._shapes[shape] = len(self._shape_list)
        self._shape_list.append(shape)

    def extend(self, chunk: Chunk) -> None:
        """Adds the rows of a journalled chunk (the intake): chunks of one period, in the order they were taken."""
        for shape in chunk.shapes:
            self._add_shape(shape)
        numbers = memoryview(chunk.shape_numbers).cast("I")
        if numbers and max(numbers) >= len(self._shape_list):
            raise ValueError("a request journal chunk names a shape no earlier chunk of its period has")
        rays = chunk.rays[:-1].split(_RAY_SEPARATOR) if chunk.count else []
        for index, (shape_number, ray_id, row) in enumerate(
            zip(numbers, rays, _NUMBERS.iter_unpack(chunk.numbers), strict=True)
        ):
            ray = ray_id.encode()
            if len(ray) == _RAY_BYTES:
                self._shape_numbers += chunk.shape_numbers[index * 4 : index * 4 + 4]
                self._numbers += chunk.numbers[index * _NUMBERS.size : (index + 1) * _NUMBERS.size]
                self._rays += ray
            else:  # a ray id a row of this format cannot hold
                self.whole_records.append(record_of(self._shape_list[shape_number], ray_id, row))
        self.whole_records.extend(chunk.whole_records)
        self.events.extend(chunk.events)

    def _columns(self) -> list[array[int]]:
        """The packed numbers, a column per ``NUMBER_COLUMNS`` (strided copies, in C)."""
        rows, width = array("q", self._numbers), len(NUMBER_COLUMNS)
        return [rows[index::width] for index in range(width)]

    def batch(self) -> pa.RecordBatch | None:
        """The rows in the packed numbers (not ``whole_records``) as one record batch of ``http_requests`` fields,
        None when there are none. Columns of nulls are left out. Raises ``pa.ArrowInvalid``, ``pa.ArrowTypeError`` or
        ``UnicodeError`` for a text Arrow cannot hold (``records`` then gives the rows)."""
        count = len(self._shape_numbers) // _SHAPE_NUMBER.size
        if not count:
            return None
        names: list[str] = ["RayID"]
        rays = pa.Array.from_buffers(pa.binary(_RAY_BYTES), count, [None, pa.py_buffer(self._rays)])
        arrays: list[pa.Array] = [rays.cast(pa.binary()).cast(pa.string())]
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
        rays = self._rays
        return [rays[start : start + _RAY_BYTES].decode() for start in range(0, len(rays), _RAY_BYTES)]


def _loads(payload: bytes) -> Any:
    try:
        return marshal.loads(payload)  # noqa: S302  # our own journal, in the data directory
    except (EOFError, TypeError, ValueError) as error:
        raise ValueError(f"a request journal frame that is not marshal data: {error}") from None


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
