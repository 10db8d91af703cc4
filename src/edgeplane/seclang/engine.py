"""The SecLang engine: rules compiled once, then evaluated on requests with ModSecurity v3's semantics.

The engine is three stages, one module each, over one compiled form:

- compiling (:mod:`edgeplane.seclang.compiler`): :func:`compile_rules` turns directives (from
  :mod:`edgeplane.seclang.rule_files`) into a :class:`RuleEngine`: each rule's targets resolved to collection lookups
  (:mod:`edgeplane.seclang.selectors`), its transformation pipeline to a tuple of functions, its operator compiled
  once (or, when its argument holds a macro, compiled per distinct expansion and cached), its actions read
  (:mod:`edgeplane.seclang.actions`), and the rules split into one program per phase with the ``SecMarker`` s that
  ``skipAfter`` resumes after;
- optimising (:mod:`edgeplane.seclang.optimiser`): what the compiled rules are found to be, so that the walk can
  pass over them without changing what it does (gates, pure reads, prefilter candidates, the TX members that
  matter);
- running (:mod:`edgeplane.seclang.runner`): :meth:`RuleEngine.evaluate` runs phase 1 then phase 2 on one request
  and returns an :class:`Evaluation`: the rules that fired and logged, the final TX collection and the anomaly
  scores.

The compiled form itself (rules, phases, programs, segments, the results) is :mod:`edgeplane.seclang.program`. This
module is the engine's face: the names below, and the semantics all three stages keep.

Semantics follow libmodsecurity 3.0.9 (what CRS 3.3.4 is tested against):

- a rule evaluates every value of every target (after ``!`` exclusions and ``ctl`` target removals), each through
  the transformation pipeline (``multiMatch``: the operator also runs on the value before and after each step);
- on each matching value: captures go to ``TX:0``-``TX:9`` (with ``capture``), ``MATCHED_VAR(S)(_NAME(S))`` are
  updated and the link's ``setvar`` s run (so a rule matching two arguments adds its score twice, as v3 does);
- a chain matches when every link matches; then each link's ``ctl`` run, the starter's flow actions
  (``skipAfter``, ``skip``) apply, and the starter is logged unless ``nolog`` (``log`` is the default, as in CRS's
  ``SecDefaultAction``);
- ``block`` means the default disruptive action, ``pass`` in CRS's anomaly scoring mode; ``deny``/``drop`` stop
  the evaluation (and are reported as ``interrupted_by``), ``allow`` stops it without blocking, only when the
  engine mode is ``On`` (CRS's regression suite runs ``DetectionOnly``);
- in phase 1 the body is not read yet: ``ARGS`` / ``ARGS_NAMES`` hold the query's arguments only and body
  collections are empty; ``IP``/``GLOBAL``/``SESSION``/``USER``/``RESOURCE`` start empty for each request (nothing
  persists between requests, so CRS's DoS rules never fire).

The request body processor is chosen from the Content-Type by :class:`~edgeplane.seclang.variables.RequestVariables`
the way modsecurity.conf-recommended's rules 200000/200001 do (XML, JSON), so those rules are not needed here; a
body that fails to parse sets ``REQBODY_ERROR`` (rule 200002 of that file is not loaded: CRS's regression suite
expects no id of it). One point follows ModSecurity v2, which CRS's regression suite was written against, rather
than v3: when the XML, JSON or multipart processor parsed the body, ``REQUEST_BODY`` is empty unless
``ctl:forceRequestBodyVariable=On`` (v3 keeps the raw body there, so the Java rules fire on XML element names the
suite expects them to ignore). Operators that need a GeoIP database or DNS (``@geoLookup``, ``@rbl``) never
match: CRS gates them behind settings that are off by default.

Written by hand: no Python library evaluates SecLang; libmodsecurity is C++ and Coraza is Go.
"""

from __future__ import annotations

from edgeplane.seclang.compiler import compile_rules, load_crs
from edgeplane.seclang.program import Evaluation, RuleMatch
from edgeplane.seclang.runner import RuleEngine

__all__ = [
    "Evaluation",
    "RuleEngine",
    "RuleMatch",
    "compile_rules",
    "load_crs",
]
