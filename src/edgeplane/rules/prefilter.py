"""Prefilters: a necessary condition of an expression that the WAF engine tests for many rules at once.

A prefilter is an RE2 pattern and the input it is searched in (``values``): when the expression is true, one of the
values contains a match. It comes from the first top-level conjunct (or the whole expression) of the form
``X matches "re"``, ``X contains "literal"``, ``any(X[*] matches "re")`` or ``any(X[*] contains "literal")``, where
``X`` is a field, indexes and functions of it (``lower(url_decode(http.request.uri.query))``). The engine groups
prefilters by ``key`` (the canonical text of ``X``), runs one ``re2.Set`` per key and evaluates only the rules whose
pattern matched.

``X`` reads one field of the request and nothing else (functions of it take only literals besides), so its values
are a pure function of that field's value: ``field`` names the request attribute, and ``values_of`` gives the values
for a value of the field without a request. The engine uses that to remember an input's search by the field's value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import re2

from edgeplane.rules.checker import Checked
from edgeplane.rules.compiler import Generator, Mapped
from edgeplane.rules.tree import Call, Compare, FieldRef, Index, Literal, Logical, Node
from edgeplane.rules.value_types import BYTES


class Prefilter:
    """``pattern`` (RE2, default options) is found in one of ``values(request)`` whenever the expression is true;
    ``key`` names the input, so prefilters with equal keys search the same values."""

    __slots__ = ("_values", "field", "key", "pattern")

    def __init__(self, key: str, pattern: str, values: Callable[[Any], Sequence[str]], field: str) -> None:
        """``values`` reads only the request attribute ``field``."""
        self.key = key
        self.pattern = pattern
        self.field = field
        self._values = values

    def values(self, request: Any) -> Sequence[str]:
        """The strings to search (empty when the input is missing); never raises."""
        return self._values(request)

    def values_of(self, field_value: Any) -> Sequence[str]:
        """The strings to search in a request whose ``field`` is ``field_value``; never raises."""
        return self._values(SimpleNamespace(**{self.field: field_value}))  # a request as far as the input can tell

    def __repr__(self) -> str:
        return f"Prefilter(key={self.key!r}, pattern={self.pattern!r})"


def derive_prefilter(checked: Checked) -> Prefilter | None:
    """The prefilter of ``checked``, or None when no top-level conjunct has a usable form."""
    root = checked.root
    conjuncts = root.operands if isinstance(root, Logical) and root.operator == "and" else (root,)
    for conjunct in conjuncts:
        prefilter = _from_conjunct(conjunct, checked)
        if prefilter is not None:
            return prefilter
    return None


def _from_conjunct(node: Node, checked: Checked) -> Prefilter | None:
    mapped = False
    if isinstance(node, Call) and node.name == "any" and len(node.args) == 1 and isinstance(node.args[0], Compare):
        node, mapped = node.args[0], True
    if not isinstance(node, Compare) or not isinstance(node.right, Literal):
        return None
    if node.operator not in ("matches", "contains") or not isinstance(node.right.value, str):
        return None
    typing = checked.typings[node.left]
    if typing.type != BYTES or typing.mapped != mapped or not _is_input(node.left):
        return None
    try:
        node.right.value.encode("utf-8")  # a pattern with bytes that are not UTF-8 cannot go into an re2.Set
    except UnicodeEncodeError:
        return None
    pattern = node.right.value if node.operator == "matches" else re2.escape(node.right.value)
    return Prefilter(
        render(node.left, checked), pattern, _values_function(node.left, checked), _field(node.left, checked)
    )


def _is_input(node: Node) -> bool:
    """A field, indexed or passed through functions whose first argument is the input (others literals)."""
    while True:
        if isinstance(node, FieldRef):
            return True
        if isinstance(node, Index):
            node = node.target
        elif isinstance(node, Call) and node.args and all(isinstance(arg, Literal) for arg in node.args[1:]):
            node = node.args[0]
        else:
            return False


def _field(node: Node, checked: Checked) -> str:
    """The request attribute of the field an input (``_is_input``) reads."""
    while True:
        if isinstance(node, FieldRef):
            return checked.fields[node].attribute
        if isinstance(node, Index):
            node = node.target
        elif isinstance(node, Call):
            node = node.args[0]
        else:
            raise TypeError(f"not an input: {node!r}")


def _values_function(node: Node, checked: Checked) -> Callable[[Any], Sequence[str]]:
    generator = Generator(checked)
    value = generator.value(node)
    if isinstance(value, Mapped):
        source = f"[{value.element} {' '.join(value.clauses)} if {value.element} is not None]"
    elif value.nullable:
        source = f"[{value.source}] if {value.source} is not None else []"
    else:
        source = f"[{value.source}]"
    function: Callable[[Any], Sequence[str]] = generator.compile(source, "[]")
    return function


def render(node: Node, checked: Checked) -> str:
    """The canonical text of a value of ``checked``: canonical field names (no aliases), indexes and literals
    written one way."""
    if isinstance(node, FieldRef):
        return checked.fields[node].name
    if isinstance(node, Index):
        key = "*" if node.key is None else str(node.key) if isinstance(node.key, int) else quote(node.key)
        return f"{render(node.target, checked)}[{key}]"
    if isinstance(node, Call):
        return f"{node.name}({', '.join(render(arg, checked) for arg in node.args)})"
    if isinstance(node, Literal):
        return quote(node.value) if isinstance(node.value, str) else str(node.value)
    raise TypeError(f"not a value: {node!r}")


def quote(text: str) -> str:
    """``text`` as a Rules-language string literal: ``"`` and ``\\`` escaped, other bytes outside printable ASCII
    as ``\\xHH``."""
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'
