"""Compiled expressions: the pipeline text -> tokens -> tree -> checked tree -> predicate, and its result."""

from __future__ import annotations

from edgeplane.rules.checker import Checked, check
from edgeplane.rules.compiler import Predicate, compile_checked
from edgeplane.rules.parser import parse
from edgeplane.rules.prefilter import Prefilter, derive_prefilter
from edgeplane.rules.request_fields import RequestFields
from edgeplane.rules.scheme import http_scheme


class Expression:
    """A compiled expression. Call it with a ``RequestFields``: the result is the expression's value, and the call
    never raises (an internal failure, which a request of the right types never causes, counts as false).
    ``predicate`` is the same function without this object's call layer, for the hottest loops."""

    __slots__ = ("fields", "predicate", "prefilter", "python_source", "source")

    def __init__(self, source: str, checked: Checked, python_source: str, predicate: Predicate) -> None:
        self.source = source
        self.fields = frozenset(field.name for field in checked.fields.values())
        self.prefilter: Prefilter | None = derive_prefilter(checked)
        self.python_source = python_source
        self.predicate = predicate

    def __call__(self, request: RequestFields) -> bool:
        return self.predicate(request)

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"


def _checked(text: str) -> Checked:
    return check(parse(text), http_scheme())


def check_expression(text: str) -> None:
    """Returns if ``text`` is a valid expression over the HTTP fields; raises ``RulesError`` (message and 0-based
    position) otherwise."""
    _checked(text)


def compile_expression(text: str) -> Expression:
    """``text`` compiled into an ``Expression``. Raises ``RulesError`` if it is not valid."""
    checked = _checked(text)
    python_source, predicate = compile_checked(checked)
    return Expression(text, checked, python_source, predicate)
