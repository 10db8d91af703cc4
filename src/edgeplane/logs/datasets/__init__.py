"""Dataset schemas: the fields of each Logpush dataset, their types and whether a filter may name them.

The schemas are data (``<dataset>.toml`` beside this module), loaded once per process and cached. A field's type
decides which filter operators apply to it (``edgeplane.logs.filter_language``) and how a log record holds its value:

==============  ==================================================================
type            value in a log record
==============  ==================================================================
``string``      ``str``
``int``         ``int``
``bool``        ``bool``
``float``       ``float`` (an ``int`` is accepted)
``timestamp``   ``int``, Unix nanoseconds (output formats convert on the way out)
``array_string`` a ``list`` or ``tuple`` of ``str``
``object``      a ``dict``; never filterable
==============  ==================================================================

A field absent from a record, or present with the value ``None``, is *missing*.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Literal, cast, get_args

from edgeplane.logs.errors import UnknownDatasetError

FieldType = Literal["string", "int", "bool", "float", "timestamp", "array_string", "object"]
FIELD_TYPES: Final[frozenset[str]] = frozenset(get_args(FieldType))

DATASETS: Final[tuple[str, ...]] = ("http_requests", "firewall_events")


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a dataset."""

    name: str
    type: FieldType
    description: str
    filterable: bool


@dataclass(frozen=True, slots=True)
class Dataset:
    """A dataset: its name and its fields in schema order."""

    name: str
    description: str
    fields: tuple[Field, ...]
    _index: Mapping[str, Field] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {f.name: f for f in self.fields})

    def field(self, name: str) -> Field | None:
        """The field called ``name`` (case-sensitive), or ``None`` when the dataset has no such field."""
        return self._index.get(name)

    @property
    def field_names(self) -> tuple[str, ...]:
        """Every field name, in schema order."""
        return tuple(f.name for f in self.fields)


def load_dataset(name: str) -> Dataset:
    """The dataset called ``name``; raises ``UnknownDatasetError`` when it is not one of ``DATASETS``."""
    if name not in DATASETS:
        raise UnknownDatasetError(name)
    return _load(name)


@functools.cache
def _load(name: str) -> Dataset:
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_dataset(tomllib.loads(text))


def parse_dataset(data: Mapping[str, Any]) -> Dataset:
    """A ``Dataset`` from the decoded TOML document; raises ``ValueError`` for a malformed schema file."""
    fields: list[Field] = []
    seen: set[str] = set()
    for entry in data["fields"]:
        name, type_ = entry["name"], entry["type"]
        if type_ not in FIELD_TYPES:
            raise ValueError(f"field {name}: unknown type {type_!r}")
        if name in seen:
            raise ValueError(f"field {name} appears twice")
        filterable = bool(entry.get("filterable", type_ != "object"))
        if filterable and type_ == "object":
            raise ValueError(f"field {name}: object-typed fields cannot be filterable")
        seen.add(name)
        fields.append(Field(name, cast(FieldType, type_), str(entry["description"]), filterable))
    return Dataset(name=str(data["name"]), description=str(data["description"]), fields=tuple(fields))
