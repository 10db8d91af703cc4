"""Record formatting: a job's ``output_options`` applied to the log records its filter let through, the gzip of a
batch, and the name of the object a batch is uploaded as.

``compile_formatter(options, dataset)`` does all the work that depends only on the options, once (and refuses the
options it cannot apply: the API calls it to check a job); the returned ``RecordFormatter`` is then called for every
delivered record, or batch:

- ``keep(record)``: the ``sample_rate`` decision, applied after the filter. It is a pure function of the record's
  ``RayID`` (of the whole record when it has none), so a retried batch keeps exactly the same records, and every
  record of one request (several ``firewall_events`` share a RayID) is kept or dropped together.
- ``join(encoded)``: a batch: ``batch_prefix``, the records separated by ``record_delimiter``, ``batch_suffix``;
  with the CVE-2021-44228 option every ``${`` of that output becomes ``x{`` (replacing keeps the length, so byte
  counts taken on encoded records stay true).

Each record is written (``record_prefix``, the selected fields, ``record_suffix``) by delivery's one encoder,
``edgeplane.logs.column_format``, a block of records at a time; what it writes is defined below, record by record,
and the per-record encoder that is this definition in code is a test oracle (``tests.support.record_encoder``), which
the tests hold the column encoder to byte for byte. The pieces both share live here: the csv text and quoting of a
value, timestamp conversion, and the template's parse.

Fields are the job's ``field_names`` in their order, or every field of the dataset in schema order. A field absent
from a record (or ``None``) is written as ``null`` in ndjson and as an empty value in csv. Timestamp fields (Unix
nanoseconds in records) are written per ``timestamp_format``: ``unixnano`` as is, ``unix`` as whole seconds
(rounded down), ``rfc3339`` as ``2026-11-21T10:00:00Z`` (UTC, whole seconds), ``rfc3339ms`` as
``2026-11-21T10:00:00.123Z`` and ``rfc3339ns`` as ``2026-11-21T10:00:00.123456789Z`` (UTC, always three or nine
fraction digits, so the text sorts as the time does; the fraction rounded down).

ndjson: the record is the JSON members ``"Field":value`` joined by ``field_delimiter`` between ``record_prefix``
and ``record_suffix``. The defaults (``{``, ``,``, ``}\\n``, no delimiter) give exactly one compact JSON object per
line, in field order.

csv: the values joined by ``field_delimiter`` between ``record_prefix`` (default empty) and ``record_suffix``
(default ``\\n``); no header line (a job that wants one puts it in ``batch_prefix``). A value holding the field
delimiter, a double quote, a carriage return or a newline is quoted, its double quotes doubled. Strings and numbers
are written as text, booleans as ``true``/``false``, arrays and objects as their compact JSON.

``record_template``: replaces the members or values between ``record_prefix`` and ``record_suffix``. Only
``{{.FieldName}}`` placeholders are understood (no functions, conditions or loops); each becomes the field's value as
the output type writes it (ndjson: its JSON, so strings arrive quoted and escaped; csv: its csv text). A
placeholder naming a field that is not among the selected fields is written as missing (``null``/empty); one naming
no field of the dataset, or any other ``{{...}}``, is refused by ``compile_formatter`` with ``OutputOptionsError``.
``field_delimiter`` is not used with a template.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, Final

import orjson

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.destination_conf import expand_date
from edgeplane.logs.errors import OutputOptionsError
from edgeplane.logs.output_options import OutputOptions
from edgeplane.logs.record_columns import json_text

_deflate: ModuleType
try:  # ISA-L's deflate: several times faster than zlib at a similar ratio
    from isal import isal_zlib as _deflate

    GZIP_LEVEL: Final = 2
    GZIP_LIBRARY: Final = "isal"
except ImportError:  # pragma: no cover - isal is a declared dependency
    _deflate = zlib
    GZIP_LEVEL = 6  # type: ignore[misc]
    GZIP_LIBRARY = "zlib"  # type: ignore[misc]

SAMPLE_KEY_FIELD: Final = "RayID"
OBJECT_SUFFIX: Final = ".log.gz"
_NANOSECONDS: Final = 1_000_000_000
_HASH_SPACE: Final = 1 << 32
_PLACEHOLDER: Final = re.compile(r"\{\{\s*\.([A-Za-z0-9_]+)\s*\}\}")
CSV_SPECIALS: Final = ('"', "\n", "\r")

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RecordFormatter:
    """The compiled output options of one job; pure and safe to share between threads."""

    options: OutputOptions
    dataset: Dataset
    fields: tuple[str, ...]
    batch_prefix: bytes
    batch_suffix: bytes
    record_delimiter: bytes
    redact: bool
    keep: Callable[[Record], bool]

    def join(self, encoded: Iterable[bytes]) -> bytes:
        """A whole batch from encoded records, prefixes, delimiters and redaction applied."""
        body = self.batch_prefix + self.record_delimiter.join(encoded) + self.batch_suffix
        return body.replace(b"${", b"x{") if self.redact else body


def compile_formatter(options: OutputOptions, dataset: Dataset) -> RecordFormatter:
    """The formatter for ``options`` on records of ``dataset``. Raises ``OutputOptionsError`` (member
    ``output_options.record_template``) for a template this formatter does not understand, and for a field name
    ``dataset`` does not have."""
    fields = options.selected_fields(dataset)
    for name in fields:
        if dataset.field(name) is None:
            raise OutputOptionsError("output_options.field_names", f"unknown field {name!r} in {dataset.name}")
    if options.record_template:
        parse_template(options.record_template, dataset)
    return RecordFormatter(
        options=options,
        dataset=dataset,
        fields=fields,
        batch_prefix=options.batch_prefix.encode(),
        batch_suffix=options.batch_suffix.encode(),
        record_delimiter=options.record_delimiter.encode(),
        redact=options.cve_2021_44228,
        keep=sampler(options.sample_rate),
    )


# -- values ---------------------------------------------------------------------------------------------------------


def timestamp_converter(timestamp_format: str) -> Callable[[Any], Any] | None:
    """How a timestamp value (Unix nanoseconds) is written for ``timestamp_format``; ``None`` for as it is."""
    return _TIMESTAMP_CONVERTERS[timestamp_format]


def _unix_seconds(value: Any) -> Any:
    return value // _NANOSECONDS if type(value) is int else value


@functools.lru_cache(maxsize=65_536)
def _rfc3339_second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339(value: Any) -> Any:
    return _rfc3339_second(value // _NANOSECONDS) if type(value) is int else value


def _rfc3339_milliseconds(value: Any) -> Any:
    if type(value) is not int:
        return value
    seconds, nanoseconds = divmod(value, _NANOSECONDS)
    return f"{_rfc3339_second(seconds)[:-1]}.{nanoseconds // 1_000_000:03d}Z"


def _rfc3339_nanoseconds(value: Any) -> Any:
    if type(value) is not int:
        return value
    seconds, nanoseconds = divmod(value, _NANOSECONDS)
    return f"{_rfc3339_second(seconds)[:-1]}.{nanoseconds:09d}Z"


_TIMESTAMP_CONVERTERS: Final[dict[str, Callable[[Any], Any] | None]] = {
    "unixnano": None,
    "unix": _unix_seconds,
    "rfc3339": _rfc3339,
    "rfc3339ms": _rfc3339_milliseconds,
    "rfc3339ns": _rfc3339_nanoseconds,
}


# -- csv ------------------------------------------------------------------------------------------------------------


def csv_quoted(text: str, specials: tuple[str, ...]) -> str:
    """``text`` as a csv value: in double quotes, its ``"`` doubled, when it holds one of ``specials`` (``"``, CR,
    LF and the field delimiter)."""
    for special in specials:
        if special in text:
            return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(value: Any) -> str:
    """A value as csv text, before quoting."""
    kind = type(value)
    if kind is str:
        text: str = value
        return text
    if value is None:
        return ""
    if kind is int:
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    return json_text(value).decode()


# -- record_template ----------------------------------------------------------------------------------------------


def parse_template(template: str, dataset: Dataset) -> list[str]:
    """The template as literal text and field names alternately (``[text, name, text, ..., text]``), checked."""
    parts: list[str] = []
    at = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(template[at : match.start()])
        name = match.group(1)
        if dataset.field(name) is None:
            raise OutputOptionsError(
                "output_options.record_template", f"unknown field {name!r}; dataset {dataset.name} has no such field"
            )
        parts.append(name)
        at = match.end()
    parts.append(template[at:])
    for literal in parts[::2]:
        if "{{" in literal or "}}" in literal:
            raise OutputOptionsError(
                "output_options.record_template",
                "only {{.FieldName}} placeholders are supported (no functions, conditions, loops or pipelines)",
            )
    return parts


# -- sampling -----------------------------------------------------------------------------------------------------


def sampler(rate: float) -> Callable[[Record], bool]:
    """The ``keep`` decision for ``sample_rate`` ``rate`` (0..1): true for about that share of records, always the
    same answer for the same ``RayID``."""
    if rate >= 1:
        return lambda record: True
    if rate <= 0:
        return lambda record: False
    threshold = int(rate * _HASH_SPACE)

    def keep(record: Record) -> bool:
        return sample_hash(record) < threshold

    return keep


def sample_hash(record: Record) -> int:
    """A number in ``[0, 2**32)`` that depends only on the record's ``RayID`` (on the whole record when it has
    none). CRC32 is fast but its low bits follow the input too closely; a multiplication by an odd constant spreads
    them (Knuth's multiplicative hashing)."""
    key = record.get(SAMPLE_KEY_FIELD)
    data = key.encode() if type(key) is str else _sorted_json(record)
    return (zlib.crc32(data) * 0x9E3779B1) & 0xFFFFFFFF


# -- batches ------------------------------------------------------------------------------------------------------


def _sorted_json(record: Record) -> bytes:
    """The record's JSON with every object's keys sorted (an integer beyond 64 bits as the standard library writes
    it)."""
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str).encode()


def gzip_batch(chunks: Iterable[bytes]) -> bytes:
    """One gzip member holding ``chunks`` in order (ISA-L level 2 when ``isal`` is installed, else zlib level 6)."""
    compressor = _deflate.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts: list[bytes] = [compressor.compress(chunk) for chunk in chunks]
    parts.append(compressor.flush())
    return b"".join(parts)


def object_name(
    directory: str, job_id: int, first_position: int, last_position: int, when: datetime, nonce: int | None = None
) -> str:
    """The name of the object holding the batch of records ``first_position``..``last_position`` (inclusive) of job
    ``job_id``, uploaded at ``when`` (made UTC; naive means UTC), under ``directory``: the destination's path or
    key prefix, ``{DATE}`` expanded, a trailing ``/`` ignored, empty for the root::

        <directory>/20261121T100005.123Z_42_00000000000000001000-00000000000000001999_9f86d081.log.gz

    Names sort by upload time to the millisecond (fixed-width time first), then by job and offsets; the random
    32-bit ``nonce`` keeps two batches of the same offsets apart (a job reads several edge workers' stores, whose
    offsets are independent). Delivery computes the name once per batch and reuses it for every retry.
    """
    moment = when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC)
    nonce = secrets.randbits(32) if nonce is None else nonce
    stamp = moment.strftime("%Y%m%dT%H%M%S") + f".{moment.microsecond // 1000:03d}Z"
    name = f"{stamp}_{job_id}_{first_position:020d}-{last_position:020d}_{nonce:08x}{OBJECT_SUFFIX}"
    folder = expand_date(directory, moment).rstrip("/")
    return f"{folder}/{name}" if folder else name
