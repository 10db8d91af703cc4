"""The filter language's tree, and its canonical JSON text.

A filter is ``{"where": <node>}``; a node is a condition (``key``, ``operator``, ``value``) or a group (``and`` or
``or`` over a non-empty list of nodes). The tree holds values exactly as the filter wrote them (``"30"`` stays a
string), so that a filter echoed back reads as the client wrote it; what a value means for a field of a given type is
the business of ``edgeplane.logs.filter_checker``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

Operator = Literal[
    "eq", "!eq", "lt", "leq", "gt", "geq", "startsWith", "endsWith",
    "!startsWith", "!endsWith", "contains", "!contains", "in", "!in",
]  # fmt: skip

OPERATORS: Final[tuple[Operator, ...]] = (
    "eq", "!eq", "lt", "leq", "gt", "geq", "startsWith", "endsWith",
    "!startsWith", "!endsWith", "contains", "!contains", "in", "!in",
)  # fmt: skip
"""The 14 operators of the seed, in the order of its table."""

SET_OPERATORS: Final[frozenset[Operator]] = frozenset({"in", "!in"})
"""Operators whose value is an array."""

NEGATED: Final[dict[Operator, Operator]] = {
    "!eq": "eq",
    "!startsWith": "startsWith",
    "!endsWith": "endsWith",
    "!contains": "contains",
    "!in": "in",
}
"""Each negated operator and the operator it is the exact complement of."""

Scalar: TypeAlias = str | int | float | bool
Value: TypeAlias = Scalar | tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Condition:
    """``{"key": key, "operator": operator, "value": value}``; ``value`` is a tuple for ``in`` and ``!in``."""

    key: str
    operator: Operator
    value: Value


@dataclass(frozen=True, slots=True)
class Group:
    """``{"and": [...]}`` or ``{"or": [...]}`` over one or more nodes."""

    kind: Literal["and", "or"]
    members: tuple[Node, ...]


Node: TypeAlias = Condition | Group


@dataclass(frozen=True, slots=True)
class Filter:
    """A whole filter: ``{"where": where}``."""

    where: Node

    def conditions(self) -> list[Condition]:
        """Every condition, depth first, left to right."""
        found: list[Condition] = []
        stack: list[Node] = [self.where]
        while stack:
            node = stack.pop()
            if isinstance(node, Condition):
                found.append(node)
            else:
                stack.extend(reversed(node.members))
        return found


def serialise_filter(tree: Filter) -> str:
    """The canonical JSON text of ``tree``: no insignificant white space, members in the order ``key``,
    ``operator``, ``value``, non-ASCII characters as UTF-8. ``parse_filter(serialise_filter(t)) == t`` for every
    tree ``parse_filter`` returns (provided the text stays within the size limit: ``1E2`` comes back as ``100.0``).
    """
    return json.dumps({"where": _to_json(tree.where)}, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _to_json(node: Node) -> dict[str, Any]:
    if isinstance(node, Condition):
        value = list(node.value) if isinstance(node.value, tuple) else node.value
        return {"key": node.key, "operator": node.operator, "value": value}
    return {node.kind: [_to_json(member) for member in node.members]}
