"""The type checker: a syntax tree to a checked tree, each node given its type, or a ``RulesError`` naming the
position and the problem (unknown field or function, type mismatch, bad regex, invalid IP or CIDR...).

Beyond its type, a value may be *mapped* (it went through ``[*]``: it stands for each element of a container, and a
comparison on it gives an ``Array<Bool>``, a function on it an array of results) and *nullable* (an index or a JSON
lookup may find nothing; a comparison on nothing is false).
"""

from __future__ import annotations

from dataclasses import dataclass

from edgeplane.rules.addresses import IPV6_OFFSET, AddressError, address_key, network_range
from edgeplane.rules.errors import RulesError
from edgeplane.rules.functions import FUNCTIONS, Argument
from edgeplane.rules.regex import compile_regex, compile_wildcard
from edgeplane.rules.scheme import Field, Scheme
from edgeplane.rules.tree import (
    BoolLiteral,
    Call,
    Compare,
    FieldRef,
    Index,
    ListReference,
    Literal,
    LiteralSet,
    Logical,
    Node,
    Not,
    Range,
)
from edgeplane.rules.value_types import BOOL, BYTES, INT, IP, ValueType, array_of


@dataclass(frozen=True, slots=True)
class Typing:
    """What the checker knows of a node's value."""

    type: ValueType
    mapped: bool = False
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Checked:
    """A checked expression: the tree, each node's typing, the fields it reads (canonical names)."""

    root: Node
    typings: dict[Node, Typing]
    fields: dict[FieldRef, Field]


OPERATORS_BY_TYPE = {
    BYTES: frozenset({"eq", "ne", "lt", "le", "gt", "ge", "contains", "matches", "wildcard", "strict wildcard", "in"}),
    INT: frozenset({"eq", "ne", "lt", "le", "gt", "ge", "in", "bitwise_and"}),
    IP: frozenset({"eq", "ne", "lt", "le", "gt", "ge", "in"}),
}
_ORDERING = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


def check(root: Node, scheme: Scheme, *, response: bool = False) -> Checked:
    """The checked form of ``root``, a boolean expression over ``scheme``; it may name the scheme's response fields
    only when ``response`` (a counting expression, evaluated once the answer is known). Raises ``RulesError``."""
    checker = _Checker(scheme, response)
    checker.boolean(root)
    return Checked(root, checker.typings, checker.fields)


class _Checker:
    def __init__(self, scheme: Scheme, response: bool) -> None:
        self.scheme = scheme
        self.response = response
        self.typings: dict[Node, Typing] = {}
        self.fields: dict[FieldRef, Field] = {}

    def boolean(self, node: Node) -> None:
        """``node`` must be a plain ``Bool`` (a condition)."""
        typing = self.node(node)
        if typing.type != BOOL or typing.mapped:
            shown = array_of(typing.type) if typing.mapped else typing.type
            if isinstance(node, Literal):
                raise RulesError("expected a condition, found a literal", node.position)
            if typing.type in OPERATORS_BY_TYPE and not typing.mapped:
                raise RulesError(f"expected a comparison operator after a value of type {shown}", _end(node))
            raise RulesError(f"expected value of type Bool, but got {shown}", node.position)

    def node(self, node: Node) -> Typing:
        typing = self._node(node)
        self.typings[node] = typing
        return typing

    def _node(self, node: Node) -> Typing:
        if isinstance(node, Logical):
            for operand in node.operands:
                self.boolean(operand)
            return Typing(BOOL)
        if isinstance(node, Not):
            self.boolean(node.operand)
            return Typing(BOOL)
        if isinstance(node, BoolLiteral):
            return Typing(BOOL)
        if isinstance(node, Compare):
            return self._compare(node)
        if isinstance(node, Literal):
            return Typing({"string": BYTES, "integer": INT}.get(node.kind, IP))
        if isinstance(node, FieldRef):
            field = self.scheme.lookup(node.name)
            if field is None:
                raise RulesError(f"unknown field {node.name!r}", node.position)
            if field.response and not self.response:
                raise RulesError(
                    f"{node.name} is only available in a counting expression (it describes the answer)", node.position
                )
            self.fields[node] = field
            return Typing(field.type)
        if isinstance(node, Index):
            return self._index(node)
        return self._call(node)

    def _index(self, node: Index) -> Typing:
        target = self.node(node.target)
        container = target.type
        if container.element is None:
            raise RulesError(f"cannot index a value of type {container}", node.position)
        if node.key is None:
            return Typing(container.element, mapped=True, nullable=False)
        wanted = int if container.kind == "Array" else str
        if not isinstance(node.key, wanted):
            raise RulesError(f"cannot access index {node.key!r} for type {container}", node.position)
        return Typing(container.element, mapped=target.mapped, nullable=True)

    def _call(self, node: Call) -> Typing:
        function = FUNCTIONS.get(node.name)
        if function is None:
            raise RulesError(f"unknown function {node.name!r}", node.position)
        arguments: list[Argument] = []
        mapped = False
        for index, arg in enumerate(node.args):
            typing = self.node(arg)
            if typing.mapped and index == 0 and function.maps_first_argument:
                mapped = True
            elif typing.mapped:
                typing = Typing(array_of(typing.type))
            literal = arg.value if isinstance(arg, Literal) and arg.kind != "IP address" else None
            arguments.append(Argument(typing.type, literal, arg.position))
        result = function.check(arguments, node.position)
        if mapped:
            return Typing(array_of(result))
        return Typing(result, nullable=any(self.typings[arg].nullable for arg in node.args) or "lookup" in node.name)

    def _compare(self, node: Compare) -> Typing:
        left = self.node(node.left)
        kind = left.type
        allowed = OPERATORS_BY_TYPE.get(kind)
        if allowed is None:
            raise RulesError(f"cannot perform this operation on type {kind}", node.operator_position)
        if node.operator not in allowed:
            raise RulesError(f"operator {node.operator!r} cannot be applied to type {kind}", node.operator_position)
        self._right(node, kind)
        return Typing(array_of(BOOL)) if left.mapped else Typing(BOOL)

    def _right(self, node: Compare, kind: ValueType) -> None:
        right = node.right
        if isinstance(right, ListReference):
            raise RulesError(f"lists are not supported ({right.name})", right.position)
        if isinstance(right, LiteralSet):
            if node.operator != "in":
                raise RulesError(f"a set may only follow 'in', not {node.operator!r}", right.position)
            for item in right.items:
                self._set_item(item, kind)
            return
        if node.operator == "in":
            raise RulesError("expected a set '{...}' after 'in'", right.position)
        if not isinstance(right, Literal):
            typing = self.node(right)
            if node.operator not in _ORDERING or typing.type != kind or typing.mapped:
                shown = array_of(typing.type) if typing.mapped else typing.type
                raise RulesError(f"expected a literal of type {kind}, but got {shown}", right.position)
            return
        self._literal(right, kind, cidr=False)
        if node.operator == "matches":
            compile_regex(str(right.value), right.position)
        elif node.operator in ("wildcard", "strict wildcard"):
            compile_wildcard(str(right.value), node.operator == "strict wildcard", right.position)

    def _set_item(self, item: Literal | Range, kind: ValueType) -> None:
        if isinstance(item, Literal) and kind == IP and (item.kind == "integer" or is_network_shorthand(item)):
            try:
                network_range(item.text)
            except AddressError as error:
                raise RulesError(str(error), item.position) from None
            return
        if isinstance(item, Literal):
            self._literal(item, kind, cidr=True)
            return
        if kind == BYTES:
            raise RulesError("ranges are not allowed in a set of strings", item.position)
        self._literal(item.low, kind, cidr=False)
        self._literal(item.high, kind, cidr=False)
        low, high = literal_number(item.low), literal_number(item.high)
        if kind == IP and (low >= IPV6_OFFSET) != (high >= IPV6_OFFSET):
            raise RulesError("incompatible range bounds: IPv4 and IPv6", item.position)
        if low > high:
            raise RulesError("incompatible range bounds: the start is after the end", item.position)

    def _literal(self, literal: Literal, kind: ValueType, cidr: bool) -> None:
        expected = {BYTES: "string", INT: "integer", IP: "IP address"}[kind]
        if literal.kind != expected:
            raise RulesError(f"expected {_a(expected)} of type {kind}, found {_a(literal.kind)}", literal.position)
        if kind == IP:
            try:
                if cidr and "/" in str(literal.value):
                    network_range(str(literal.value))
                else:
                    address_key(str(literal.value))
            except AddressError as error:
                raise RulesError(str(error), literal.position) from None


def is_network_shorthand(literal: Literal) -> bool:
    """An IPv4 literal of fewer than four parts (``10.1``): only a network in a set."""
    return literal.kind == "IP address" and ":" not in literal.text and literal.text.split("/")[0].count(".") < 3


def literal_number(literal: Literal) -> int:
    """The integer value of an integer literal, or the key of an IP address literal (see ``addresses``)."""
    if isinstance(literal.value, int):
        return literal.value
    return address_key(literal.value)


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiouI" else "a ") + kind


def _end(node: Node) -> int:
    if isinstance(node, FieldRef):
        return node.position + len(node.name)
    return node.position
