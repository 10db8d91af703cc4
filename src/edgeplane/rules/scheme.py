"""The field scheme: which fields an expression may name, their types, and where a request keeps their values.

The list is data (``fields.toml`` beside this module), loaded once. Its response fields describe the answer, not
the request: the checker lets only a counting expression name them. Attribute names are derived from field names
(dots become underscores) and checked to be identifiers, so the compiler can write them into generated source.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from edgeplane.rules.value_types import BOOL, BYTES, INT, IP, ValueType, array_of, map_of

SCHEME_FILE = Path(__file__).with_name("fields.toml")

_SCALARS = {"Bytes": BYTES, "Int": INT, "Bool": BOOL, "Ip": IP}


@dataclass(frozen=True, slots=True)
class Field:
    """A field of the scheme: its canonical ``name``, ``type`` and the ``RequestFields`` attribute holding it;
    ``response`` when it is a field of the answer (``http.response.*``)."""

    name: str
    type: ValueType
    attribute: str
    response: bool = False


@dataclass(frozen=True, slots=True)
class Scheme:
    """The fields by name, aliases included (an alias maps to the canonical field)."""

    fields: dict[str, Field]

    def lookup(self, name: str) -> Field | None:
        """The field ``name`` names (canonical or alias), or None if the scheme has no such field."""
        return self.fields.get(name)


def parse_type(text: str) -> ValueType:
    """The type written as ``Bytes``, ``Array<Int>``, ``Map<Array<Bytes>>``... Raises ``ValueError`` otherwise."""
    if text in _SCALARS:
        return _SCALARS[text]
    for prefix, build in (("Array<", array_of), ("Map<", map_of)):
        if text.startswith(prefix) and text.endswith(">"):
            return build(parse_type(text[len(prefix) : -1]))
    raise ValueError(f"unknown type {text!r}")


@functools.cache
def http_scheme() -> Scheme:
    """The HTTP scheme (``fields.toml``). Raises ``ValueError`` if the data file is malformed (a bug in edgeplane)."""
    data = tomllib.loads(SCHEME_FILE.read_text(encoding="utf-8"))
    fields: dict[str, Field] = {}
    for table, response in (("fields", False), ("response_fields", True)):
        for name, type_text in data[table].items():
            attribute = name.replace(".", "_")
            if not attribute.isidentifier():
                raise ValueError(f"field {name!r} does not map to an attribute name")
            fields[name] = Field(name, parse_type(type_text), attribute, response)
    for alias, target in data["aliases"].items():
        fields[alias] = fields[target]
    return Scheme(fields)
