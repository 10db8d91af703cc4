"""ndjson from records in columns, written with Arrow kernels: no Python object per record or per value.

Why by hand: delivery's budget is about two microseconds per record, and turning each kept record into a dictionary
for the per-record encoder (``edgeplane.logs.record_format``) costs about that alone. Arrow has no JSON writer, but
its string kernels do everything ndjson needs, a column at a time: each selected field becomes a column of JSON text
(``"null"`` for a missing value), and one element-wise join puts them between the record prefix, the members'
``"Name":`` keys, the field delimiter and the record suffix.

The bytes are exactly those of the per-record encoder (a property test holds the two together):

- strings: ``\\`` and ``"`` escaped, in double quotes; a column holding a control character (below U+0020, which JSON
  escapes in several ways) is written value by value with ``orjson``, as the per-record encoder writes it;
- integers and booleans: their text; timestamps per ``timestamp_format`` (``unix`` divides by 10^9, rounding down;
  ``rfc3339`` formats the whole second in UTC, ``rfc3339ms`` and ``rfc3339ns`` with three and nine fraction digits);
- floats and arrays (rare in records, and with text forms Arrow writes differently from ``orjson``) value by value
  with ``orjson``; objects, stored as their JSON text, as they are;
- a column missing from the block, or holding only nulls, is a constant ``null`` folded into the text around it; one
  of a type its field does not have (a loose column, ``record_columns.batch_of_any_rows``, among them) is written as
  the per-record encoder would write its values.

Only ndjson without ``record_template`` is written this way (``compile_column_encoder`` returns ``None`` for csv and
templates, which delivery then formats per record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.output_options import OutputOptions
from edgeplane.logs.record_columns import arrow_schema, loose_values
from edgeplane.logs.record_format import timestamp_converter

ColumnEncoder = Callable[[pa.RecordBatch], list[bytes]]

_NULL: Final = "null"
_NANOSECONDS: Final = 1_000_000_000
_CONTROL: Final = bytes(range(0x20))
_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"  # Arrow writes %S with the fraction digits of the timestamp's unit
# Each RFC 3339 format: the divisor from nanoseconds to its unit, and that unit.
_RFC3339_UNITS: Final = {"rfc3339": (_NANOSECONDS, "s"), "rfc3339ms": (1_000_000, "ms"), "rfc3339ns": (1, "ns")}


def compile_column_encoder(options: OutputOptions, dataset: Dataset) -> ColumnEncoder | None:
    """The encoder of ``options`` for blocks of ``dataset`` records: a function from a record batch to the encoded
    records in order, as ``RecordFormatter.encode`` writes them; ``None`` when ``options`` are csv or use a
    ``record_template``. The function never raises for a batch of the dataset's records."""
    if options.output_type != "ndjson" or options.record_template:
        return None
    fields = options.selected_fields(dataset)
    schema = arrow_schema(dataset)
    writers = [
        _value_writer(schema.field(name).type, _type_of(dataset, name), options.timestamp_format) for name in fields
    ]
    keys = [orjson.dumps(name).decode() + ":" for name in fields]
    separators = [options.record_prefix + keys[0]] if fields else [options.record_prefix]
    separators += [options.field_delimiter + key for key in keys[1:]]
    suffix = options.record_suffix

    def encode(batch: pa.RecordBatch) -> list[bytes]:
        if batch.num_rows == 0:
            return []
        pieces: list[str | pa.Array] = []
        for index, name in enumerate(fields):
            position = batch.schema.get_field_index(name)
            if position < 0 or batch.column(position).null_count == batch.num_rows:
                pieces += [separators[index] + _NULL]  # the same text on every row: no pass over the rows
                continue
            text, quoted = writers[index](batch.column(position))
            quote = '"' if quoted else ""
            pieces += [separators[index] + quote, text, quote]
        if not fields:
            pieces.append(separators[0])
        pieces.append(suffix)
        merged = _merged(pieces)
        if all(isinstance(piece, str) for piece in merged):  # every field null or absent: one line for all
            return ["".join(merged).encode()] * batch.num_rows
        lines = pc.binary_join_element_wise(*merged, "")
        encoded: list[bytes] = lines.cast(pa.binary()).to_pylist()
        return encoded

    return encode


def _merged(pieces: list[str | pa.Array]) -> list[str | pa.Array]:
    """``pieces`` with adjacent strings joined: each argument of the join costs a pass over the rows."""
    merged: list[str | pa.Array] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif not (isinstance(piece, str) and not piece and merged):
            merged.append(piece)
    return merged


def _type_of(dataset: Dataset, name: str) -> str:
    field = dataset.field(name)
    return field.type if field is not None else "object"


def _value_writer(
    expected: pa.DataType, field_type: str, timestamp_format: str
) -> Callable[[pa.Array], tuple[pa.Array, bool]]:
    """A function from a column to the column of its values' JSON text (never null), and whether that text still
    needs its double quotes around it (the join adds them, sparing a pass over the column)."""

    def write(column: pa.Array) -> tuple[pa.Array, bool]:
        if not column.type.equals(expected):
            return _one_by_one(column, None), False
        if field_type == "string":
            return _strings(column)
        if field_type == "timestamp" and timestamp_format != "unixnano":
            return _timestamps(column, timestamp_format)
        if field_type in ("int", "timestamp", "bool"):
            return pc.fill_null(column.cast(pa.string()), _NULL), False
        if field_type == "object":
            return pc.fill_null(column, _NULL), False
        return _one_by_one(column, None), False  # float, array_string

    return write


def _strings(column: pa.Array) -> tuple[pa.Array, bool]:
    data = column.buffers()[2]
    characters = data.to_pybytes() if data is not None else b""
    if len(characters.translate(None, _CONTROL)) != len(characters):  # a C loop; a regular expression is slower
        return _one_by_one(column, None), False
    if b"\\" in characters:
        column = pc.replace_substring(column, "\\", "\\\\")
    if b'"' in characters:
        column = pc.replace_substring(column, '"', '\\"')
    if column.null_count:
        return pc.fill_null(pc.binary_join_element_wise('"', column, '"', ""), _NULL), False
    return column, True


def _timestamps(column: pa.Array, timestamp_format: str) -> tuple[pa.Array, bool]:
    if pc.min(column).as_py() < 0:  # before 1970: Arrow's division rounds towards zero, Python's down
        return _one_by_one(column, timestamp_format), False
    if timestamp_format == "unix":
        return pc.fill_null(pc.divide(column, _NANOSECONDS).cast(pa.string()), _NULL), False
    divisor, unit = _RFC3339_UNITS[timestamp_format]
    in_unit = pc.divide(column, divisor) if divisor != 1 else column
    text = pc.strftime(in_unit.cast(pa.timestamp(unit)), format=_RFC3339)
    if column.null_count:
        return pc.fill_null(pc.binary_join_element_wise('"', text, '"', ""), _NULL), False
    return text, True


def _one_by_one(column: pa.Array, timestamp_format: str | None) -> pa.Array:
    """The column's JSON text value by value with ``orjson`` (timestamps converted as the per-record encoder does)."""
    dumps = orjson.dumps
    values = loose_values(column)
    convert = timestamp_converter(timestamp_format) if timestamp_format is not None else None
    if convert is not None:
        values = [convert(value) for value in values]
    return pa.array([dumps(value).decode() for value in values], type=pa.string())
