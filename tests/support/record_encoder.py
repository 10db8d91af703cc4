"""The per-record encoder of a Logpush job's output: one record, as a dictionary, to the bytes delivery writes for it.

It is the definition of the output formats (``edgeplane.logs.record_format``'s docstring) in code, written record by
record to be read, and the oracle delivery's one encoder (``edgeplane.logs.column_format``, a block of records at a
time with Arrow kernels) is held to byte for byte. No production code calls it: delivery writes in columns only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.output_options import OutputOptions
from edgeplane.logs.record_columns import json_text
from edgeplane.logs.record_format import (
    CSV_SPECIALS,
    Record,
    RecordFormatter,
    compile_formatter,
    csv_quoted,
    csv_text,
    parse_template,
    timestamp_converter,
)


@dataclass(frozen=True, slots=True)
class RecordEncoder:
    """A job's formatter with the per-record encoder of its options."""

    formatter: RecordFormatter
    encode: Callable[[Record], bytes]

    def keep(self, record: Record) -> bool:
        """The formatter's sampling decision."""
        return self.formatter.keep(record)

    def format(self, records: Iterable[Record]) -> bytes:
        """A batch of every record of ``records`` encoded (no sampling: call ``keep`` first)."""
        encode = self.encode
        return self.formatter.join([encode(record) for record in records])


def compile_record_encoder(options: OutputOptions, dataset: Dataset) -> RecordEncoder:
    """The per-record encoder of ``options``; raises what ``compile_formatter`` raises."""
    return record_encoder(compile_formatter(options, dataset))


def record_encoder(formatter: RecordFormatter) -> RecordEncoder:
    """The per-record encoder of the options ``formatter`` was compiled from."""
    options, dataset = formatter.options, formatter.dataset
    fields = formatter.fields
    prefix = options.record_prefix.encode()
    suffix = options.record_suffix.encode()
    template = parse_template(options.record_template, dataset) if options.record_template else None
    if options.output_type == "csv":
        select = _selector(fields, dataset, options.timestamp_format)
        encode = _csv_encoder(fields, select, prefix, suffix, options.field_delimiter, template)
    else:
        encode = _ndjson_encoder(
            fields, dataset, options.timestamp_format, prefix, suffix, options.field_delimiter, template
        )
    return RecordEncoder(formatter, encode)


def _is_timestamp(dataset: Dataset, name: str) -> bool:
    field = dataset.field(name)
    return field is not None and field.type == "timestamp"


# -- field selection ----------------------------------------------------------------------------------------------


def _selector(fields: tuple[str, ...], dataset: Dataset, timestamp_format: str) -> Callable[[Record], list[Any]]:
    """A function from a record to the values of ``fields`` in order, timestamps converted."""
    select: Callable[[Record], list[Any]] = _generate(fields, dataset, timestamp_format, "[", "]")
    return select


def _member_selector(
    fields: tuple[str, ...], dataset: Dataset, timestamp_format: str
) -> Callable[[Record], dict[str, Any]]:
    """A function from a record to a dict of ``fields`` in order (what ndjson writes), timestamps converted."""
    select: Callable[[Record], dict[str, Any]] = _generate(fields, dataset, timestamp_format, "{", "}")
    return select


def _generate(fields: tuple[str, ...], dataset: Dataset, timestamp_format: str, opening: str, closing: str) -> Any:
    """One list display (``[g(n0), _ts(g(n1)), ...]``) or dict display (``{n0: g(n0), ...}``) compiled into a
    function of the record ``r``. Field names are bound as closure constants ``n0``, ``n1``, ..., never written in
    the source. It runs several times faster than a loop over the fields."""
    convert = timestamp_converter(timestamp_format)
    names = [f"n{index}" for index in range(len(fields))]
    items = [
        f"_ts(g({name}))" if convert is not None and _is_timestamp(dataset, field) else f"g({name})"
        for name, field in zip(names, fields, strict=True)
    ]
    if opening == "{":
        items = [f"{name}: {item}" for name, item in zip(names, items, strict=True)]
    source = (
        f"def _factory(_ts, {', '.join(names) or '_unused=None'}):\n"
        "    def select(r):\n"
        "        g = r.get\n"
        f"        return {opening}{', '.join(items)}{closing}\n"
        "    return select\n"
    )
    namespace: dict[str, Any] = {"__builtins__": {}}
    exec(compile(source, "<logpush field selection>", "exec"), namespace)
    return namespace["_factory"](convert, *fields)


# -- ndjson -------------------------------------------------------------------------------------------------------


def _ndjson_encoder(
    fields: tuple[str, ...],
    dataset: Dataset,
    timestamp_format: str,
    prefix: bytes,
    suffix: bytes,
    delimiter: str,
    template: list[str] | None,
) -> Callable[[Record], bytes]:
    dumps = json_text  # orjson's text, and an integer beyond 64 bits as it is
    if template is not None:
        select = _selector(fields, dataset, timestamp_format)
        return _template_encoder(fields, select, prefix, suffix, template, lambda value: dumps(value).decode())
    members = _member_selector(fields, dataset, timestamp_format)
    if delimiter == ",":
        # orjson writes the whole object in one call; only its braces are swapped for the prefix and suffix
        if prefix == b"{" and suffix.startswith(b"}"):
            tail = suffix[1:]

            def encode_default(record: Record) -> bytes:
                return dumps(members(record)) + tail

            return encode_default

        def encode_affixed(record: Record) -> bytes:
            return prefix + dumps(members(record))[1:-1] + suffix

        return encode_affixed
    separator = delimiter.encode()
    keys = [dumps(name) + b":" for name in fields]
    select = _selector(fields, dataset, timestamp_format)

    def encode_members(record: Record) -> bytes:
        pairs = [key + dumps(value) for key, value in zip(keys, select(record), strict=True)]
        return prefix + separator.join(pairs) + suffix

    return encode_members


# -- csv ----------------------------------------------------------------------------------------------------------


def _csv_encoder(
    fields: tuple[str, ...],
    select: Callable[[Record], list[Any]],
    prefix: bytes,
    suffix: bytes,
    delimiter: str,
    template: list[str] | None,
) -> Callable[[Record], bytes]:
    specials = (*CSV_SPECIALS, delimiter) if delimiter else CSV_SPECIALS

    def quoted(text: str) -> str:
        return csv_quoted(text, specials)

    if template is not None:
        return _template_encoder(fields, select, prefix, suffix, template, lambda value: quoted(csv_text(value)))
    prefix_text, suffix_text = prefix.decode(), suffix.decode()
    separators = len(fields) - 1

    def encode(record: Record) -> bytes:
        texts = [value if type(value) is str else csv_text(value) for value in select(record)]
        row = delimiter.join(texts)
        # the common case: no value needs quoting, which one scan of the whole row shows
        if ('"' in row or "\n" in row or "\r" in row) or (delimiter and row.count(delimiter) != separators):
            row = delimiter.join([quoted(text) for text in texts])
        return (prefix_text + row + suffix_text).encode()

    return encode


# -- record_template ----------------------------------------------------------------------------------------------


def _template_encoder(
    fields: tuple[str, ...],
    select: Callable[[Record], list[Any]],
    prefix: bytes,
    suffix: bytes,
    template: list[str],
    render: Callable[[Any], str],
) -> Callable[[Record], bytes]:
    position = {name: index for index, name in enumerate(fields)}
    literals = template[::2]
    # -1 stands for a field that is not selected: always missing
    slots = [position.get(name, -1) for name in template[1::2]]
    missing = render(None)
    prefix_text, suffix_text = prefix.decode(), suffix.decode()

    def encode(record: Record) -> bytes:
        values = select(record)
        pieces = [prefix_text, literals[0]]
        for slot, literal in zip(slots, literals[1:], strict=True):
            pieces.append(render(values[slot]) if slot >= 0 else missing)
            pieces.append(literal)
        pieces.append(suffix_text)
        return "".join(pieces).encode()

    return encode
