"""The syntax tree of an expression, as the parser builds it (untyped; the checker gives each node its type).

Nodes compare by identity (``eq=False``) so the checker can key its types by node.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False, slots=True)
class Literal:
    """A string, integer or IP literal; ``kind`` is the token kind's value (``string``, ``integer``, ``IP
    address``), ``value`` the decoded string or integer, or the IP text (address or CIDR)."""

    kind: str
    value: str | int
    position: int
    text: str


@dataclass(frozen=True, eq=False, slots=True)
class Range:
    """``low..high`` in a set (integers or IP addresses)."""

    low: Literal
    high: Literal
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class LiteralSet:
    """``{item item ...}`` on the right of ``in``."""

    items: tuple[Literal | Range, ...]
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class ListReference:
    """``$name``: a managed list (not supported by edgeplane; the checker says so)."""

    name: str
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class FieldRef:
    """A field by name (an alias or the canonical name)."""

    name: str
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class Index:
    """``target[key]``: ``key`` is an ``int`` (array index), a ``str`` (map key) or None for ``[*]``."""

    target: Value
    key: int | str | None
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class Call:
    """``name(arg, ...)``; an argument is a value, a literal or a (boolean) expression."""

    name: str
    args: tuple[Node, ...]
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class Compare:
    """``left operator right``; ``operator`` is the canonical word (``eq``, ``strict wildcard``, ``bitwise_and``)."""

    left: Value
    operator: str
    right: Literal | LiteralSet | ListReference | FieldRef | Index | Call
    position: int
    operator_position: int


@dataclass(frozen=True, eq=False, slots=True)
class Not:
    """``not operand``."""

    operand: Node
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class Logical:
    """``a and b and ...`` (``operator`` is ``and``, ``xor`` or ``or``), flattened: all operands of one operator."""

    operator: str
    operands: tuple[Node, ...]
    position: int


@dataclass(frozen=True, eq=False, slots=True)
class BoolLiteral:
    """``true`` or ``false`` standing alone (accepted by the Cloudflare API, though not by wirefilter itself)."""

    value: bool
    position: int


Value = FieldRef | Index | Call
Node = Value | Literal | Compare | Not | Logical | BoolLiteral
