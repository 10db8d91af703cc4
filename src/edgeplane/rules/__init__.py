"""The Rules language (wirefilter syntax): parse, type-check and compile expressions over HTTP request fields.

``compile_expression`` turns an expression into an ``Expression``: a callable over ``RequestFields`` that never
raises, with the fields it reads and, when it has one, a ``Prefilter`` for bulk matching. ``check_expression``
validates only; with ``response=True`` both accept the answer's fields (a counting expression). Invalid expressions
raise ``RulesError`` with the 0-based position of the problem. ``JsonRpcFacts`` is what a request asks as JSON-RPC,
the values of the ``edgeplane.jsonrpc.*`` fields (``RequestFields.jsonrpc_reader``).
"""

from __future__ import annotations

from edgeplane.rules.errors import RulesError
from edgeplane.rules.expression import Expression, check_expression, compile_expression
from edgeplane.rules.jsonrpc_facts import JsonRpcFacts
from edgeplane.rules.prefilter import Prefilter
from edgeplane.rules.request_fields import RequestFields

__all__ = [
    "Expression",
    "JsonRpcFacts",
    "Prefilter",
    "RequestFields",
    "RulesError",
    "check_expression",
    "compile_expression",
]
