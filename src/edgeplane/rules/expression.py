"""Compiled expressions: the pipeline text -> tokens -> tree -> checked tree -> predicate, and its result."""

from __future__ import annotations

from typing import Protocol, cast

from edgeplane.rules.checker import Checked, check
from edgeplane.rules.compiler import Predicate, compile_checked
from edgeplane.rules.parser import parse
from edgeplane.rules.prefilter import Prefilter, derive_prefilter
from edgeplane.rules.request_fields import RequestFields
from edgeplane.rules.scheme import http_scheme


class Expression(Protocol):
    """A compiled expression. Call it with a ``RequestFields``: the result is the expression's value, and the call
    never raises (an internal failure, which a request of the right types never causes, counts as false).

    It is the generated function itself, carrying these attributes, so that a call costs one Python call and
    nothing more (a wrapper object's ``__call__`` doubled the cost of a three-clause expression).
    ``predicate`` is the same function, kept for callers that want the bare callable."""

    source: str
    fields: frozenset[str]
    prefilter: Prefilter | None
    python_source: str
    predicate: Predicate

    def __call__(self, request: RequestFields) -> bool: ...


def _checked(text: str, response: bool) -> Checked:
    return check(parse(text), http_scheme(), response=response)


def check_expression(text: str, *, response: bool = False) -> None:
    """Returns if ``text`` is a valid expression over the HTTP fields; raises ``RulesError`` (message and 0-based
    position) otherwise. ``response``: the expression is a counting expression, evaluated once the answer is known
    (``RequestFields.set_response``), and may name the ``http.response.*`` fields; otherwise naming one is an
    error."""
    _checked(text, response)


def compile_expression(text: str, *, response: bool = False) -> Expression:
    """``text`` compiled into an ``Expression`` (``response`` as for ``check_expression``). Raises ``RulesError`` if
    it is not valid."""
    checked = _checked(text, response)
    python_source, predicate = compile_checked(checked)
    expression = cast(Expression, predicate)  # a fresh function per compilation: its attributes are its own
    expression.source = text
    expression.fields = frozenset(field.name for field in checked.fields.values())
    expression.prefilter = derive_prefilter(checked)
    expression.python_source = python_source
    expression.predicate = predicate
    return expression
