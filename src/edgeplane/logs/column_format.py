"""Records in columns written as a job's output with Arrow kernels: no Python object per record or per value.

This is delivery's one encoder. Why by hand: delivery's budget is about two microseconds per record, and turning each
kept record into a dictionary for a per-record encoder (``tests.support.record_encoder``, kept as the test oracle
this module is held to) costs about that alone. Arrow has no JSON or csv writer, but its string kernels do
everything a record needs, a column at a time: each selected field becomes a column of its text (``null`` in ndjson,
empty in csv, for a missing value), and one element-wise join puts them between the record prefix, the ndjson
members' ``"Name":`` keys or the csv field delimiter, a ``record_template``'s literal text, and the record suffix.

The bytes are exactly those of the per-record encoder (property tests hold the two together):

- strings: in ndjson ``\\`` and ``"`` escaped, in double quotes; a column holding a control character (below
  U+0020, which JSON escapes in several ways) is written value by value with ``orjson``, as the per-record encoder
  writes it. In csv as they are;
- integers and booleans: their text; timestamps per ``timestamp_format`` (``unix`` divides by 10^9, rounding down;
  ``rfc3339`` formats the whole second in UTC, ``rfc3339ms`` and ``rfc3339ns`` with three and nine fraction digits);
- floats and arrays (rare in records, and with text forms Arrow writes differently from ``orjson``) value by value
  with ``orjson``; objects, stored as their JSON text, as they are;
- in csv, a column whose text holds a double quote, CR, LF or the field delimiter is quoted value by value;
- a column missing from the block, or holding only nulls, is a constant folded into the text around it; one of a
  type its field does not have (a loose column, ``record_columns.batch_of_any_rows``, among them) is written value
  by value as the per-record encoder would write its values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.output_options import OutputOptions
from edgeplane.logs.record_columns import arrow_schema, json_text, loose_values
from edgeplane.logs.record_format import CSV_SPECIALS, csv_quoted, csv_text, parse_template, timestamp_converter

ColumnEncoder = Callable[[pa.RecordBatch], list[bytes]]

_NULL: Final = "null"
_NANOSECONDS: Final = 1_000_000_000
_CONTROL: Final = bytes(range(0x20))
_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"  # Arrow writes %S with the fraction digits of the timestamp's unit
# Each RFC 3339 format: the divisor from nanoseconds to its unit, and that unit.
_RFC3339_UNITS: Final = {"rfc3339": (_NANOSECONDS, "s"), "rfc3339ms": (1_000_000, "ms"), "rfc3339ns": (1, "ns")}


def compile_column_encoder(options: OutputOptions, dataset: Dataset) -> ColumnEncoder:
    """The encoder of ``options`` for blocks of ``dataset`` records: a function from a record batch to the encoded
    records in order, as the output formats define them (``edgeplane.logs.record_format``: ndjson, csv, with or
    without a ``record_template``). Raises ``OutputOptionsError`` for a template ``compile_formatter`` refuses. The
    function never raises for a batch of the dataset's records."""
    fields = options.selected_fields(dataset)
    schema = arrow_schema(dataset)
    csv = options.output_type == "csv"
    missing = "" if csv else _NULL
    writers = {
        name: _value_writer(schema.field(name).type, _type_of(dataset, name), options.timestamp_format)
        for name in fields
    }
    if csv:
        specials = (*CSV_SPECIALS, options.field_delimiter) if options.field_delimiter else CSV_SPECIALS
        writers = {
            name: _csv_writer(schema.field(name).type, _type_of(dataset, name), options.timestamp_format, specials)
            for name in fields
        }
    # The record as constant texts and the fields whose values go between them (``_Slot``), in order.
    layout: list[str | _Slot] = [options.record_prefix]
    if options.record_template:
        template = parse_template(options.record_template, dataset)
        layout.append(template[0])
        for name, literal in zip(template[1::2], template[2::2], strict=True):
            layout += [_Slot(name) if name in writers else missing, literal]
    elif csv:
        for index, name in enumerate(fields):
            layout += [options.field_delimiter, _Slot(name)] if index else [_Slot(name)]
    else:
        for index, name in enumerate(fields):
            key = orjson.dumps(name).decode() + ":"
            layout += [options.field_delimiter + key if index else key, _Slot(name)]
    layout.append(options.record_suffix)

    def encode(batch: pa.RecordBatch) -> list[bytes]:
        if batch.num_rows == 0:
            return []
        pieces: list[str | pa.Array] = []
        for item in layout:
            if isinstance(item, str):
                pieces.append(item)
                continue
            position = batch.schema.get_field_index(item.name)
            if position < 0 or batch.column(position).null_count == batch.num_rows:
                pieces.append(missing)  # the same text on every row: no pass over the rows
                continue
            text, quoted = writers[item.name](batch.column(position))
            quote = '"' if quoted else ""
            pieces += [quote, text, quote]
        merged = _merged(pieces)
        if all(isinstance(piece, str) for piece in merged):  # every field null or absent: one line for all
            return ["".join(merged).encode()] * batch.num_rows
        lines = pc.binary_join_element_wise(*merged, "")
        encoded: list[bytes] = lines.cast(pa.binary()).to_pylist()
        return encoded

    return encode


@dataclass(frozen=True, slots=True)
class _Slot:
    """Where a field's value goes in an encoded record."""

    name: str


ValueWriter = Callable[[pa.Array], tuple[pa.Array, bool]]


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

    converted = timestamp_format if field_type == "timestamp" else None

    def write(column: pa.Array) -> tuple[pa.Array, bool]:
        if not column.type.equals(expected):  # a loose column among them: its timestamps converted, as ``encode`` does
            return _one_by_one(column, converted), False
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


def _csv_writer(
    expected: pa.DataType, field_type: str, timestamp_format: str, specials: tuple[str, ...]
) -> ValueWriter:
    """A function from a column to the column of its values' csv text, as ``encode`` writes them: a missing value
    empty; strings, integers, Booleans and timestamps as their text; floats, arrays and objects as compact JSON
    (objects as stored); a text holding one of ``specials`` quoted, its ``"`` doubled."""
    convert = timestamp_converter(timestamp_format) if field_type == "timestamp" else None

    def write(column: pa.Array) -> tuple[pa.Array, bool]:
        text: pa.Array | None = None
        if column.type.equals(expected):
            if field_type in ("string", "object"):
                text = column
            elif field_type in ("int", "bool") or (field_type == "timestamp" and convert is None):
                text = column.cast(pa.string())
            elif field_type == "timestamp":
                text = _timestamp_text(column, timestamp_format)
        if text is None:  # floats, arrays, a column of another type (a loose one among them): value by value
            values = loose_values(column)
            if convert is not None:
                values = [convert(value) for value in values]
            return pa.array([csv_quoted(csv_text(value), specials) for value in values], pa.string()), False
        text = pc.fill_null(text, "")
        data = text.buffers()[2]
        characters = data.to_pybytes() if data is not None else b""
        if any(special.encode() in characters for special in specials):
            text = pa.array([csv_quoted(value, specials) for value in text.to_pylist()], pa.string())
        return text, False

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
    text = _timestamp_text(column, timestamp_format)
    if text is None:
        return _one_by_one(column, timestamp_format), False
    if timestamp_format == "unix":
        return pc.fill_null(text, _NULL), False
    if column.null_count:
        return pc.fill_null(pc.binary_join_element_wise('"', text, '"', ""), _NULL), False
    return text, True


def _timestamp_text(column: pa.Array, timestamp_format: str) -> pa.Array | None:
    """The text of a column of timestamps in ``timestamp_format`` (other than ``unixnano``), null where the value
    is; ``None`` for a column holding a time before 1970, which Arrow's division rounds towards zero, Python's down."""
    if pc.min(column).as_py() < 0:
        return None
    if timestamp_format == "unix":
        return pc.divide(column, _NANOSECONDS).cast(pa.string())
    divisor, unit = _RFC3339_UNITS[timestamp_format]
    in_unit = pc.divide(column, divisor) if divisor != 1 else column
    return pc.strftime(in_unit.cast(pa.timestamp(unit)), format=_RFC3339)


def _one_by_one(column: pa.Array, timestamp_format: str | None) -> pa.Array:
    """The column's JSON text value by value with ``orjson`` (timestamps converted as the per-record encoder does)."""
    dumps = json_text  # orjson's text, and an integer beyond 64 bits (in a loose column) as it is
    values = loose_values(column)
    convert = timestamp_converter(timestamp_format) if timestamp_format is not None else None
    if convert is not None:
        values = [convert(value) for value in values]
    return pa.array([dumps(value).decode() for value in values], type=pa.string())
