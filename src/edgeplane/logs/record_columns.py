"""Log records in columns: a block of records as one Arrow record batch, the form the log store keeps them in.

Why columns: delivery's budget is about two microseconds per record, and building a Python dictionary per record
(``orjson.loads``) costs more than that alone. In columns, a job's filter is a handful of vectorised comparisons over
whole blocks (``edgeplane.logs.filter_columns``), only the columns a job needs are touched, and only the records it
keeps ever become Python objects. Arrow is the columnar format made for exactly this: typed, nullable columns, a
stable serialisation (the IPC stream format) that is read back without copying, and compute kernels in C++.

Each dataset's schema (``arrow_schema``) maps the field types of ``edgeplane.logs.datasets``: ``string`` to
``string``, ``int`` and ``timestamp`` (Unix nanoseconds) to ``int64``, ``float`` to ``float64``, ``bool`` to
``bool``, ``array_string`` to ``list<string>``, and ``object`` to ``string`` holding the value's JSON (marked in
the field's metadata, so that it comes back as the object). ``ZoneName``, which the edge adds to every record so that
delivery can give a zone's jobs their records, is a column as well. A field missing from a record is a null.

A block holds only the columns at least one of its records has: the edge fills about 30 of the 70 ``http_requests``
fields, and a column of nulls would cost as much to build as one of values. Readers treat an absent column as all
nulls (``column_or_nulls``).

Every record has a column form, so that the store keeps one form whatever it is given:

- ``batch_of_rows`` converts records that fit the schema, and returns ``None`` for those that do not (a key the
  dataset does not have, a value of another type, an integer beyond 64 bits, text UTF-8 cannot encode).
- ``batch_of_any_rows`` converts any records: each column that fits its field keeps the field's type; every other
  column is *loose*: ``binary`` holding each value's JSON text (``loose_values`` decodes it), a type no field has,
  so that the column filter and the column encoder recognise it and take its values one by one, as the per-record
  oracles would. Records without any field are one column of nulls named ``LINE``.
- ``batch_of_lines`` keeps records given as bytes (the store's ``append``) as they were given, in the one ``binary``
  column ``LINE``; ``batch_of_given_lines`` turns such a block into columns for readers of columns (the JSON of each
  line decoded, a line that is not a JSON object kept as the text of ``LINE``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, Literal

import orjson
import pyarrow as pa

from edgeplane.logs.datasets import DATASETS, Dataset, load_dataset

ZONE_NAME: Final = "ZoneName"
LINE: Final = "_line"  # the column of records kept as the bytes they were given, or of records without any field
_JSON_METADATA: Final = {b"edgeplane.json": b"1"}
_LINE_METADATA: Final = {b"edgeplane.line": b"1"}
_ARROW_TYPES: Final[dict[str, pa.DataType]] = {
    "string": pa.string(),
    "int": pa.int64(),
    "timestamp": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "array_string": pa.list_(pa.string()),
    "object": pa.string(),
}
_EMPTY_TYPES: Final = (pa.null(), pa.list_(pa.null()))  # all nulls, or only empty lists: no type to contradict
_CONVERSION_ERRORS: Final = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)

Compression = Literal["zstd", "lz4", "none"]
COMPRESSIONS: Final[tuple[Compression, ...]] = ("zstd", "lz4", "none")
# zstd at level 1: about four times smaller blocks than none on generated records (seven on the edge's, which repeat
# more), for a little more CPU a record to read (docs/log-store.md); lz4 reads a little faster and keeps twice as much.
_WRITE_OPTIONS: Final[dict[Compression, pa.ipc.IpcWriteOptions]] = {
    "zstd": pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=1)),
    "lz4": pa.ipc.IpcWriteOptions(compression="lz4"),
    "none": pa.ipc.IpcWriteOptions(),
}


@functools.cache
def arrow_schema(dataset: Dataset) -> pa.Schema:
    """The Arrow schema of ``dataset``'s records: its fields in schema order, then ``ZoneName``."""
    fields = [
        pa.field(f.name, _ARROW_TYPES[f.type], metadata=_JSON_METADATA if f.type == "object" else None)
        for f in dataset.fields
    ]
    if dataset.field(ZONE_NAME) is None:
        fields.append(pa.field(ZONE_NAME, pa.string()))
    return pa.schema(fields)


def schema_of(dataset_name: str) -> pa.Schema | None:
    """The schema of a known dataset; ``None`` for any other stream name (its types are inferred per block)."""
    return arrow_schema(load_dataset(dataset_name)) if dataset_name in DATASETS else None


def encode_rows(
    dataset_name: str, rows: Sequence[Mapping[str, Any]], compression: Compression = "zstd"
) -> memoryview | None:
    """``rows`` as one Arrow IPC stream holding one record batch (``encode_batch``), or ``None`` when they do not
    fit the dataset's schema (see the module docstring). ``rows`` must not be empty."""
    batch = batch_of_rows(dataset_name, rows)
    return None if batch is None else encode_batch(batch, compression)


def batch_of_rows(dataset_name: str, rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch | None:
    """``rows`` (dictionaries of JSON values) as one record batch, or ``None`` when they do not fit the dataset's
    schema. Each column's type is inferred from its values and must be the field's: a conversion to the field's
    type would turn 1.5 into 1."""
    present: dict[str, None] = {}
    for row in rows:
        present.update(dict.fromkeys(row))
    if not present:
        return None  # a batch without columns has no rows either; empty records stay lines
    schema = schema_of(dataset_name)
    try:
        if schema is None:
            return pa.RecordBatch.from_pydict({name: [row.get(name) for row in rows] for name in present})
        if any(schema.get_field_index(name) < 0 for name in present):
            return None
        fields = [field for field in schema if field.name in present]
        arrays = []
        for field in fields:
            array = _typed_column(field, [row.get(field.name) for row in rows])
            if array is None:
                return None
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    except _CONVERSION_ERRORS:
        return None


def batch_of_any_rows(dataset_name: str, rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    """``rows`` as one record batch whatever their shape (see the module docstring): ``batch_of_rows`` when they fit
    the schema, else the columns that fit typed and the others loose. Never raises for dictionaries of JSON values
    (a value JSON cannot hold is kept as its text); ``rows`` must not be empty."""
    strict = batch_of_rows(dataset_name, rows)
    if strict is not None:
        return strict
    present: dict[str, None] = {}
    for row in rows:
        present.update(dict.fromkeys(row))
    if not present:
        return pa.RecordBatch.from_arrays([pa.nulls(len(rows), pa.binary())], names=[LINE])
    schema = schema_of(dataset_name)
    known = [] if schema is None else [field.name for field in schema if field.name in present]
    names = [*known, *(name for name in present if name not in known)]
    fields: list[pa.Field] = []
    arrays: list[pa.Array] = []
    for name in names:
        values = [row.get(name) for row in rows]
        index = -1 if schema is None else schema.get_field_index(name)
        array: pa.Array | None = None
        field = schema.field(index) if schema is not None and index >= 0 else None
        try:
            if field is not None:
                array = _typed_column(field, values)
            elif schema is None and type(name) is str:
                array = pa.array(values)
                field = pa.field(name, array.type)
        except _CONVERSION_ERRORS:
            array = None
        if array is None or field is None:
            field = pa.field(_safe_text(name), pa.binary(), metadata=_JSON_METADATA)
            array = pa.array([None if value is None else json_text(value) for value in values], type=pa.binary())
        fields.append(field)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _typed_column(field: pa.Field, values: list[Any]) -> pa.Array | None:
    """``values`` as a column of ``field``'s type, or ``None`` when they are of another; raises the conversion
    errors (``_CONVERSION_ERRORS``, ``UnicodeError``) of a value Arrow cannot hold."""
    if field.metadata == _JSON_METADATA:
        values = [None if value is None else orjson.dumps(value).decode() for value in values]
    array = pa.array(values)
    if not array.type.equals(field.type):
        if array.type not in _EMPTY_TYPES:
            return None
        array = array.cast(field.type)
    return array


def json_text(value: Any) -> bytes:
    """``value`` as compact JSON, as ``orjson`` writes it; an integer beyond 64 bits, which ``orjson`` does not
    write, as the standard library writes it; a value JSON cannot hold (text with a lone surrogate) as the JSON of its
    text, lone surrogates as their escape sequences."""
    try:
        return orjson.dumps(value, default=str)
    except (orjson.JSONEncodeError, TypeError):
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()
        except (ValueError, TypeError, UnicodeError):
            return orjson.dumps(_safe_text(value))


def _safe_text(value: object) -> str:
    """``value`` as text UTF-8 can encode: a lone surrogate becomes its escape sequence; valid text is unchanged."""
    text = value if isinstance(value, str) else str(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_loose(column: pa.Array) -> bool:
    """Whether ``column`` is loose (each value's JSON text, ``batch_of_any_rows``) rather than of a field's type."""
    loose: bool = pa.types.is_binary(column.type)
    return loose


def loose_values(column: pa.Array) -> list[Any]:
    """The values of a column as Python objects, a loose column's decoded from their JSON."""
    if not is_loose(column):
        return column.to_pylist()  # type: ignore[no-any-return]
    loads = json.loads  # not orjson's, which reads an integer beyond 64 bits as a float
    return [None if value is None else loads(value) for value in column.to_pylist()]


def batch_of_lines(records: Sequence[bytes]) -> pa.RecordBatch:
    """Records given as bytes, kept as they are in the one column ``LINE`` (``lines_given`` gives them back)."""
    schema = pa.schema([pa.field(LINE, pa.binary(), metadata=_LINE_METADATA)])
    return pa.RecordBatch.from_arrays([pa.array(records, type=pa.binary())], schema=schema)


def lines_given(batch: pa.RecordBatch) -> list[bytes] | None:
    """The records of a batch ``batch_of_lines`` made, as they were given; ``None`` for any other batch."""
    if batch.num_columns != 1 or batch.schema.field(0).metadata != _LINE_METADATA:
        return None
    lines: list[bytes] = batch.column(0).to_pylist()
    return lines


def batch_of_given_lines(dataset_name: str, lines: Sequence[bytes]) -> pa.RecordBatch:
    """Records given as JSON lines, in columns (``batch_of_any_rows``); a line that is not a JSON object becomes
    a record whose ``LINE`` is its text."""
    rows: list[Mapping[str, Any]] = []
    for line in lines:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        rows.append(row if isinstance(row, dict) else {LINE: line.decode("utf-8", "backslashreplace")})
    return batch_of_any_rows(dataset_name, rows)


def batch_of_columns(dataset_name: str, columns: Mapping[str, Sequence[Any]]) -> pa.RecordBatch | None:
    """Records given column by column (``columns`` maps a field's name to its values, one per record, ``None`` for
    a missing value) as one record batch of the dataset's schema, or ``None`` when every column is all nulls.

    For producers that know their types: each column is converted to its field's type without
    inferring it first, which costs a third as much as ``batch_of_rows``; a column of nulls is left out, a column
    of one repeated value is built from that value once, and a sequence given for two fields is converted once.
    Raises ``KeyError`` for a name the dataset does not have and ``pa.ArrowInvalid``, ``pa.ArrowTypeError``,
    ``OverflowError`` or ``UnicodeEncodeError`` for a value its field cannot hold (an ``int`` field also takes a
    ``float``, truncated, and values that compare equal count as one repeated value: the caller's types must be
    right). ``object`` fields take their JSON text."""
    known = _fields_by_name(dataset_name)
    fields: list[pa.Field] = []
    arrays: list[pa.Array] = []
    converted: dict[int, tuple[Sequence[Any], pa.Array]] = {}  # by the id of the values (kept alive here)
    for name, values in columns.items():
        field = known.get(name)
        if field is None:
            raise KeyError(f"{dataset_name} has no field {name!r}")
        seen = converted.get(id(values))
        if seen is not None and seen[0] is values and seen[1].type.equals(field.type):
            array = seen[1]
        else:
            first = values[0] if values else None
            alike = values.count(first) == len(values)  # every value equal to the first (or no value at all)
            if alike and first is None:
                continue
            if alike and len(values) > 1:  # the scalars of single rows would only fill the cache
                scalar = _scalar(first, field.type) if isinstance(first, str | int) else pa.scalar(first, field.type)
                array = pa.repeat(scalar, len(values))
            else:
                array = pa.array(values, type=field.type)
            converted[id(values)] = (values, array)
        fields.append(field)
        arrays.append(array)
    if not fields:
        return None
    return pa.RecordBatch.from_arrays(arrays, schema=_subset_schema(dataset_name, tuple(f.name for f in fields)))


def conform(dataset_name: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its fields replaced by the dataset's own (their metadata says which columns hold JSON).
    Raises ``ValueError`` when a column is not a field of the dataset, or not of its type; a loose column
    (``batch_of_any_rows``) is taken as it is, whatever its name. A stream that is not a known dataset takes any
    batch."""
    if dataset_name not in DATASETS:
        return batch
    given = batch.schema
    if len(set(given.names)) != len(given.names):
        raise ValueError(f"{dataset_name}: a batch names a column twice: {given.names}")
    if any(_loose_field(field) for field in given):
        known = _fields_by_name(dataset_name)
        fields = []
        for field in given:
            if not _loose_field(field):
                expected = known.get(field.name)
                if expected is None or not field.type.equals(expected.type):
                    raise ValueError(f"{dataset_name}.{field.name} is not a field of type {field.type}")
                field = expected
            fields.append(field)
        return pa.RecordBatch.from_arrays(batch.columns, schema=pa.schema(fields))
    try:
        schema = _subset_schema(dataset_name, tuple(given.names))
    except KeyError as error:
        raise ValueError(f"{dataset_name} has no field {error.args[0]!r}") from None
    if given.equals(schema, check_metadata=True):
        return batch  # built from the dataset's fields already (``batch_of_columns``)
    for field in given:
        expected = schema.field(field.name)
        if not field.type.equals(expected.type):
            raise ValueError(f"{dataset_name}.{field.name} is {expected.type}, not {field.type}")
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def _loose_field(field: pa.Field) -> bool:
    """Whether ``field`` is a loose column's (``batch_of_any_rows``): JSON text in ``binary``, or ``LINE``."""
    loose: bool = pa.types.is_binary(field.type) and (field.metadata == _JSON_METADATA or field.name == LINE)
    return loose


def encode_batch(batch: pa.RecordBatch, compression: Compression = "zstd") -> memoryview:
    """``batch`` as an Arrow IPC stream: a block's payload in the log store (a view of Arrow's buffer, not a copy:
    a second's rows are megabytes), each column's buffers compressed with ``compression`` (``COMPRESSIONS``):
    Arrow's own buffer compression, which its reader undoes by itself, so blocks of any compression read alike."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_WRITE_OPTIONS[compression]) as writer:
        writer.write_batch(batch)
    return memoryview(sink.getvalue())


@functools.lru_cache(maxsize=256)
def _subset_schema(dataset_name: str, names: tuple[str, ...]) -> pa.Schema:
    """The schema of the dataset's fields ``names``, in that order, built once per set of columns (a batch's columns
    change rarely); ``KeyError`` for a name the dataset does not have."""
    known = _fields_by_name(dataset_name)
    return pa.schema([known[name] for name in names])


@functools.lru_cache(maxsize=4096, typed=True)
def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    """``value`` as an Arrow scalar of ``type_``, built once per value (a block's repeated values recur)."""
    return pa.scalar(value, type=type_)


@functools.cache
def _fields_by_name(dataset_name: str) -> dict[str, pa.Field]:
    """The fields of a known dataset's schema by name; ``KeyError`` for another name."""
    schema = schema_of(dataset_name)
    if schema is None:
        raise KeyError(f"no such dataset: {dataset_name!r}")
    return {field.name: field for field in schema}


def decode_block(payload: bytes, names: Collection[str] | None = None) -> pa.RecordBatch:
    """The record batch of a block ``encode_batch`` wrote (without copying buffers it need not decompress), with
    only the columns ``names`` when given (those the block has; at least one, for the count of records): the others
    are neither decompressed nor read. Raises ``pa.ArrowInvalid`` for bytes that are not one."""
    buffer = pa.py_buffer(payload)
    options = None
    if names is not None:
        schema = pa.ipc.read_schema(buffer)
        included = [index for index, name in enumerate(schema.names) if name in names]
        options = pa.ipc.IpcReadOptions(included_fields=included or [0])
    with pa.ipc.open_stream(buffer, options=options) as reader:
        return reader.read_next_batch()


def column_or_nulls(batch: pa.RecordBatch, name: str, type_: pa.DataType) -> pa.Array:
    """Column ``name`` of ``batch``, or a column of nulls of ``type_`` when the block has none."""
    index = batch.schema.get_field_index(name)
    if index >= 0:
        return batch.column(index)
    return pa.nulls(batch.num_rows, type=type_)


def combined(batches: Sequence[pa.RecordBatch], names: Sequence[str]) -> pa.RecordBatch:
    """One record batch of the records of ``batches`` in order, with those of the columns ``names`` that any of them
    has (a column one batch lacks is null there). Vectorised work costs about the same per call whatever the number
    of rows, so delivery works on a read's blocks together rather than on each block of a few hundred records."""
    projected = [batch.select([name for name in names if batch.schema.get_field_index(name) >= 0]) for batch in batches]
    if all(batch.schema == projected[0].schema for batch in projected):
        return pa.concat_batches(projected)
    table = pa.concat_tables([pa.Table.from_batches([batch]) for batch in projected], promote_options="default")
    return table.combine_chunks().to_batches()[0]


def rows_of(batch: pa.RecordBatch, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The records of ``batch`` as dictionaries with the columns ``names`` (every column when ``None``) that the
    batch has; nulls are ``None`` and JSON-text columns are decoded back to their objects."""
    if names is not None:
        batch = batch.select([name for name in names if batch.schema.get_field_index(name) >= 0])
    rows: list[dict[str, Any]] = batch.to_pylist()
    for field in batch.schema:
        if field.metadata == _JSON_METADATA:
            name = field.name
            loads = json.loads if pa.types.is_binary(field.type) else orjson.loads  # loose: any integer, exactly
            for row in rows:
                if row[name] is not None:
                    row[name] = loads(row[name])
    return rows


def lines_of(batch: pa.RecordBatch) -> list[bytes]:
    """The records of ``batch`` as compact JSON lines, as the edge would have written them: a null is a missing
    field. A batch of records given as bytes gives them back as they were given."""
    given = lines_given(batch)
    if given is not None:
        return given
    return [json_text({key: value for key, value in row.items() if value is not None}) for row in rows_of(batch)]
