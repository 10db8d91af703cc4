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

``encode_rows`` never loses a record silently: when the records do not fit the schema (a key the dataset does not
have, a value of another type, an integer beyond 64 bits, or no field at all) it returns ``None``, and the store
writes those records as JSON lines instead.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson
import pyarrow as pa

from edgeplane.logs.datasets import DATASETS, Dataset, load_dataset

ZONE_NAME: Final = "ZoneName"
_JSON_METADATA: Final = {b"edgeplane.json": b"1"}
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


def encode_rows(dataset_name: str, rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """``rows`` as one Arrow IPC stream holding one record batch, or ``None`` when they do not fit the dataset's
    schema (see the module docstring). ``rows`` must not be empty."""
    present: dict[str, None] = {}
    for row in rows:
        present.update(dict.fromkeys(row))
    if not present:
        return None  # a batch without columns has no rows either; empty records stay lines
    schema = schema_of(dataset_name)
    try:
        if schema is None:
            batch = pa.RecordBatch.from_pydict({name: [row.get(name) for row in rows] for name in present})
        else:
            if any(schema.get_field_index(name) < 0 for name in present):
                return None
            fields = [field for field in schema if field.name in present]
            arrays = []
            for field in fields:
                name = field.name
                values = [row.get(name) for row in rows]
                if field.metadata == _JSON_METADATA:
                    values = [None if value is None else orjson.dumps(value).decode() for value in values]
                array = pa.array(values)  # inferred: a conversion to the field's type would coerce 1.5 to 1
                if not array.type.equals(field.type):
                    if array.type not in _EMPTY_TYPES:
                        return None
                    array = array.cast(field.type)
                arrays.append(array)
            batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    except _CONVERSION_ERRORS:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def decode_block(payload: bytes) -> pa.RecordBatch:
    """The record batch of a block ``encode_rows`` wrote (without copying its buffers). Raises ``pa.ArrowInvalid``
    for bytes that are not one."""
    with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
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
    decoded = [field.name for field in batch.schema if field.metadata == _JSON_METADATA]
    for name in decoded:
        for row in rows:
            if row[name] is not None:
                row[name] = orjson.loads(row[name])
    return rows


def lines_of(batch: pa.RecordBatch) -> list[bytes]:
    """The records of ``batch`` as compact JSON lines, as the edge would have written them: a null is a missing
    field."""
    dumps = orjson.dumps
    return [dumps({key: value for key, value in row.items() if value is not None}) for row in rows_of(batch)]
