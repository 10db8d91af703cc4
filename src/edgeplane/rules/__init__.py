"""The Rules language (wirefilter syntax): parse, type-check and compile expressions over HTTP request fields.

``compile_expression`` turns an expression into an ``Expression``: a callable over ``RequestFields`` that never
raises, with the fields it reads and, when it has one, a ``Prefilter`` for bulk matching. ``check_expression``
validates only. Invalid expressions raise ``RulesError`` with the 0-based position of the problem.
"""

from __future__ import annotations

from edgeplane.rules.errors import RulesError
from edgeplane.rules.expression import Expression, check_expression, compile_expression
from edgeplane.rules.prefilter import Prefilter
from edgeplane.rules.request_fields import RequestFields

__all__ = ["Expression", "Prefilter", "RequestFields", "RulesError", "check_expression", "compile_expression"]
