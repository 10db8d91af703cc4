"""The types of Rules-language values, named as wirefilter names them in its messages (``Bytes``, ``Array<Int>``).

At run time a ``Bytes`` value is a Python ``str`` (request bytes decoded as UTF-8, invalid bytes kept as lone
surrogates by ``surrogateescape``, so no byte is lost), ``Int`` an ``int``, ``Bool`` a ``bool``, ``Ip`` an ``int`` key
(see ``edgeplane.rules.addresses``), ``Array<T>`` a ``list`` and ``Map<T>`` a ``dict`` with ``str`` keys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ValueType:
    """A scalar type (``element`` is None) or a container (``kind`` is ``Array`` or ``Map``) of ``element``."""

    kind: str
    element: ValueType | None = None

    def __str__(self) -> str:
        return self.kind if self.element is None else f"{self.kind}<{self.element}>"

    @property
    def is_container(self) -> bool:
        """True for ``Array<T>`` and ``Map<T>``."""
        return self.element is not None


BYTES = ValueType("Bytes")
INT = ValueType("Int")
BOOL = ValueType("Bool")
IP = ValueType("Ip")


def array_of(element: ValueType) -> ValueType:
    """The type ``Array<element>``."""
    return ValueType("Array", element)


def map_of(element: ValueType) -> ValueType:
    """The type ``Map<element>``."""
    return ValueType("Map", element)
