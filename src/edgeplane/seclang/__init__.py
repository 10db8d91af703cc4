"""A SecLang engine: load ModSecurity rule files (the OWASP Core Rule Set) and evaluate them on HTTP requests.

The package is built in named stages, as Coraza lays out its engine: ``rule_files`` reads SecLang into a typed
model, ``transformations``, ``operators`` and ``actions`` give the pieces of a rule their meaning, ``variables``
(with ``request_body``) exposes a request as ModSecurity's collections, and the engine compiles the model
(``compiler``), optimises what it compiled (``optimiser``) and runs it on a request (``runner``) with ModSecurity v3's
semantics for phases 1 and 2, over one compiled form (``program``, ``selectors``); ``engine`` is its face. ``errors``
holds the one exception hierarchy. The names below are the public surface; the modules are importable for their details.
"""

from edgeplane.seclang.engine import Evaluation, RuleEngine, RuleMatch, compile_rules, load_crs
from edgeplane.seclang.errors import (
    OperatorArgumentError,
    RuleFileError,
    SecLangError,
    UnknownTransformation,
    UnsupportedOperator,
)
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.rule_files import load_rule_files, parse_rules

__all__ = [
    "Evaluation",
    "HttpRequest",
    "OperatorArgumentError",
    "RuleEngine",
    "RuleFileError",
    "RuleMatch",
    "SecLangError",
    "UnknownTransformation",
    "UnsupportedOperator",
    "compile_rules",
    "load_crs",
    "load_rule_files",
    "parse_rules",
]
