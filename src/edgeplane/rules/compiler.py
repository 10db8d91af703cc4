"""The compiler: a checked expression turned, once, into one Python function over ``RequestFields``.

The function's body is the expression a person would write by hand (``r.http_request_method == c0 and ...``),
compiled with ``compile()``: field reads are attribute reads, comparisons are Python operators on ``str`` and
``int``, a CIDR is a chained integer comparison, ``matches`` one call into RE2. No text from the expression enters the
generated source: attribute names come from the scheme (edgeplane's data, checked to be identifiers), strings, sets
and patterns are bound as closure variables (``c0``, ``c1``...), integers are written as their ``repr``.

The function never raises: its body runs in ``try`` (free in Python 3.11 until something raises), and any exception,
which a well-typed request never causes, makes the expression false.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from edgeplane.rules.addresses import address_key, network_range
from edgeplane.rules.checker import Checked, is_network_shorthand, literal_number
from edgeplane.rules.functions import FUNCTIONS
from edgeplane.rules.regex import compile_regex, compile_wildcard
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
    Value,
)
from edgeplane.rules.value_types import BOOL, BYTES, IP

Predicate = Callable[[Any], bool]

_ORDER = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _at(container: Any, key: Any) -> Any:
    """``container[key]``, or None when the container is None or has no such element."""
    if container is None:
        return None
    if isinstance(container, dict):
        return container.get(key)
    return container[key] if key < len(container) else None


def _each(container: Any) -> Any:
    """The elements of an array or the values of a map; nothing for None."""
    if container is None:
        return ()
    return container.values() if isinstance(container, dict) else container


def _xor(values: Sequence[bool]) -> bool:
    return sum(map(bool, values)) % 2 == 1


_RUNTIME: dict[str, Any] = {"_at": _at, "_each": _each, "_xor": _xor}
_BUILTINS = {"any": any, "all": all, "Exception": Exception}


@dataclass(frozen=True, slots=True)
class Plain:
    """Source of one value; ``nullable`` when it may be None."""

    source: str
    nullable: bool


@dataclass(frozen=True, slots=True)
class Mapped:
    """Source of each element of a ``[*]`` value: ``clauses`` are the comprehension's ``for`` clauses."""

    clauses: tuple[str, ...]
    element: str
    nullable: bool


class Generator:
    """Python source for the nodes of one checked expression, with the constants it binds."""

    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.constants: list[Any] = []
        self.names = 0

    def temporary(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def constant(self, value: Any) -> str:
        if isinstance(value, bool | int):
            return repr(value)
        self.constants.append(value)
        return f"c{len(self.constants) - 1}"

    def compile(self, source: str, label: str) -> Callable[..., Any]:
        """The function ``def f(r): return <source>`` (false on any exception), with this generator's constants."""
        names = [f"c{index}" for index in range(len(self.constants))]
        factory_source = (
            f"def _factory({', '.join(['_at', '_each', '_xor', *names])}):\n"
            "    def rule(r):\n"
            "        try:\n"
            f"            return {source}\n"
            "        except Exception:\n"
            f"            return {label}\n"
            "    return rule\n"
        )
        namespace: dict[str, Any] = {"__builtins__": _BUILTINS}
        exec(compile(factory_source, "<rules expression>", "exec"), namespace)  # noqa: S102 - no user text in source
        function: Callable[..., Any] = namespace["_factory"](_at, _each, _xor, *self.constants)
        return function

    # Conditions.

    def condition(self, node: Node) -> str:
        """Source of a ``Bool`` node (a plain one, not mapped)."""
        if isinstance(node, Logical):
            parts = [self.condition(operand) for operand in node.operands]
            if node.operator == "xor":
                return f"({parts[0]} != {parts[1]})" if len(parts) == 2 else f"_xor(({', '.join(parts)},))"
            return "(" + f" {node.operator} ".join(parts) + ")"
        if isinstance(node, Not):
            return f"(not {self.condition(node.operand)})"
        if isinstance(node, BoolLiteral):
            return repr(node.value)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, FieldRef | Index | Call):
            value = self.value(node)
            assert isinstance(value, Plain)
            return f"({value.source} is True)" if value.nullable else value.source
        raise TypeError(f"not a condition: {node!r}")

    def compare(self, node: Compare) -> str:
        """Source of a comparison: a ``bool``, or a list of them when its left side is mapped."""
        left = self.value(node.left)
        if isinstance(left, Plain):
            return self._guarded(left.source, left.nullable, node)
        test = self._guarded(left.element, left.nullable, node)
        return f"[{test} {' '.join(left.clauses)}]"

    def _guarded(self, source: str, nullable: bool, node: Compare) -> str:
        if nullable:
            name = self.temporary("v")
            return f"(({name} := {source}) is not None and {self._test(name, node)})"
        if _simple(source) or not self._uses_twice(node):
            return self._test(source, node)
        name = self.temporary("v")
        return f"(({name} := {source}) is not None and {self._test(name, node)})"

    def _uses_twice(self, node: Compare) -> bool:
        return isinstance(node.right, LiteralSet) and self.checked.typings[node.left].type != BYTES

    def _test(self, value: str, node: Compare) -> str:
        operator, right = node.operator, node.right
        kind = self.checked.typings[node.left].type
        if isinstance(right, LiteralSet):
            return self._membership(value, right, kind == IP)
        if isinstance(right, ListReference):
            raise TypeError("lists are rejected by the checker")
        if not isinstance(right, Literal):
            other = self.value(right)
            assert isinstance(other, Plain)
            if other.nullable:
                name = self.temporary("w")
                return f"(({name} := {other.source}) is not None and {value} {_ORDER[operator]} {name})"
            return f"({value} {_ORDER[operator]} {other.source})"
        if operator == "matches":
            return f"{self.constant(compile_regex(str(right.value), right.position).test)}({value})"
        if operator in ("wildcard", "strict wildcard"):
            pattern = compile_wildcard(str(right.value), operator == "strict wildcard", right.position)
            return f"{self.constant(pattern.test)}({value})"
        if operator == "contains":
            return f"({self.constant(right.value)} in {value})"
        literal = address_key(str(right.value)) if kind == IP else right.value
        if operator == "bitwise_and":
            return f"(({value} & {self.constant(literal)}) != 0)"
        return f"({value} {_ORDER[operator]} {self.constant(literal)})"

    def _membership(self, value: str, items: LiteralSet, is_ip: bool) -> str:
        exact: set[str | int] = set()
        ranges: list[tuple[int, int]] = []
        for item in items.items:
            if isinstance(item, Literal):
                if is_ip and (item.kind == "integer" or is_network_shorthand(item) or "/" in item.text):
                    ranges.append(network_range(item.text))
                elif is_ip and "/" in str(item.value):
                    ranges.append(network_range(str(item.value)))
                elif is_ip:
                    exact.add(address_key(str(item.value)))
                else:
                    exact.add(item.value)
            else:
                ranges.append((literal_number(item.low), literal_number(item.high)))
        parts = []
        if exact:
            parts.append(f"{value} in {self.constant(frozenset(exact))}")
        parts.extend(f"{self.constant(low)} <= {value} <= {self.constant(high)}" for low, high in ranges)
        return "(" + " or ".join(parts) + ")" if parts else "False"

    # Values.

    def value(self, node: Value | Node) -> Plain | Mapped:
        """Source of a value node: ``Plain``, or ``Mapped`` after ``[*]``."""
        typing = self.checked.typings[node]
        if isinstance(node, FieldRef):
            return Plain(f"r.{self.checked.fields[node].attribute}", False)
        if isinstance(node, Literal):
            return Plain(self.constant(node.value), False)
        if isinstance(node, Compare | Logical | Not | BoolLiteral):
            if typing.type == BOOL:
                return Plain(self.condition(node), False)
            assert isinstance(node, Compare)
            return Plain(self.compare(node), False)
        if isinstance(node, Index):
            return self._index(node)
        if isinstance(node, Call):
            return self._call(node)
        raise TypeError(f"not a value: {node!r}")

    def _index(self, node: Index) -> Plain | Mapped:
        target = self.value(node.target)
        container = self.checked.typings[node.target].type
        if node.key is None:
            name = self.temporary("e")
            source = target.source if isinstance(target, Plain) else target.element
            if target.nullable:
                iterable = f"_each({source})"
            elif container.kind == "Map":
                iterable = f"{source}.values()"
            else:
                iterable = source
            clauses = target.clauses if isinstance(target, Mapped) else ()
            return Mapped((*clauses, f"for {name} in {iterable}"), name, False)
        key = self.constant(node.key)
        if isinstance(target, Plain):
            return Plain(f"_at({target.source}, {key})", True)
        return Mapped(target.clauses, f"_at({target.element}, {key})", True)

    def _call(self, node: Call) -> Plain | Mapped:
        function = FUNCTIONS[node.name]
        literal_params = function.literal_params(len(node.args))
        literals = {index: _literal_value(node.args[index]) for index in literal_params}
        implementation = self.constant(function.bind(literals))
        typing = self.checked.typings[node]
        if node.name in ("any", "all") and isinstance(node.args[0], Compare):
            left = self.value(node.args[0].left)
            if isinstance(left, Mapped):  # a generator, not a list: any() stops at the first true element
                test = self._guarded(left.element, left.nullable, node.args[0])
                return Plain(f"{node.name}({test} {' '.join(left.clauses)})", False)
        arguments = [self.value(arg) for index, arg in enumerate(node.args) if index not in literal_params]
        if arguments and isinstance(arguments[0], Mapped):
            first = arguments[0]
            rest = [argument.source for argument in arguments[1:] if isinstance(argument, Plain)]
            call = f"{implementation}({', '.join([first.element, *rest])})"
            return Plain(f"[{call} {' '.join(first.clauses)}]", False)
        sources = [argument.source for argument in arguments if isinstance(argument, Plain)]
        return Plain(f"{implementation}({', '.join(sources)})", typing.nullable)


def _literal_value(node: Node) -> str | int:
    assert isinstance(node, Literal), "the checker admits only literals here"
    return node.value


def _simple(source: str) -> bool:
    """A name or an attribute of ``r``: cheap to read twice."""
    return source.replace("r.", "", 1).isidentifier()


def compile_checked(checked: Checked) -> tuple[str, Predicate]:
    """The generated source of ``checked`` and the predicate compiled from it (false on any exception)."""
    generator = Generator(checked)
    source = generator.condition(checked.root)
    return source, generator.compile(source, "False")
