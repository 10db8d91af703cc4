"""The OWASP Core Rule Set (CRS) installed on this machine, compiled by the SecLang engine, for the OWASP Core Ruleset.

The content is the real CRS (3.3.4, as Debian's ``modsecurity-crs`` installs it in ``/usr/share/modsecurity-crs``;
``waf.crs_rules_dir`` names another directory), never a copy in this repository: its ``REQUEST-9*.conf`` files are
read once per process (``read_crs()``) when the Rulesets API or a firewall first lists them, and compiled
(``core_rule_set()``) once per process: by an edge worker at its start (``prepare_core_rule_set()``), elsewhere when a
firewall first executes the OWASP Core Ruleset. A deployment's paranoia level, threshold and overrides select from
that one compiled engine (the level is CRS's executing paranoia level, the overrides its removed rules, the threshold
the firewall's score rule), so changing them compiles no SecLang. This module
knows CRS; the catalogue (``edgeplane.waf.catalogue``) gives it the Rulesets API's shape and the firewall
(``edgeplane.waf.firewall``) runs it.

The rules offered are the CRS rules that score: a ``severity``, a log, and an id of files 911 to 944 (not the
initialisation, IP reputation, blocking-evaluation or correlation rules). Each has a paranoia level: its
``paranoia-level/N`` tag, or else the paranoia section of its file (after CRS's
``TX:EXECUTING_PARANOIA_LEVEL "@lt N"`` gate), and the CRS tags.

A request is evaluated with CRS's executing paranoia level set by the caller and the rules it names removed (as
``ctl:ruleRemoveById`` would), in ``DetectionOnly`` mode: what a match does is the firewall's decision.

edgeplane's exclusion packages (``exclusions/*.conf`` beside this module, SecLang written for edgeplane) are
compiled with the CRS, after its initialisation file, as CRS's own application exclusion packages are: the JSON-RPC
package keeps the protocol's normal traffic from scoring (docs/waf.md).

Without the rule files, ``read_crs()`` and ``core_rule_set()`` raise ``CoreRuleSetUnavailable``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from edgeplane.rules import RequestFields
from edgeplane.seclang import Evaluation, HttpRequest, RuleEngine, SecLangError, compile_rules, load_rule_files
from edgeplane.seclang.actions import compile_actions
from edgeplane.seclang.rule_files import Directive, SecRule

log = structlog.get_logger(__name__)

DEFAULT_CRS_RULES_DIR: Final = Path("/usr/share/modsecurity-crs/rules")
# edgeplane's own exclusion packages, loaded after CRS's initialisation as CRS's application exclusions are.
EXCLUSION_FILES: Final = (Path(__file__).with_name("exclusions") / "json-rpc.conf",)
# What crs-setup.conf would set: its version marker (without it rule 901001 reports CRS as unconfigured).
_CRS_SETUP: Final[Mapping[str, str]] = {"crs_setup_version": "334"}
_SEVERITIES: Final[Mapping[str, str]] = {"CRITICAL": "critical", "ERROR": "error", "WARNING": "warning"}
_SCORING_IDS: Final = range(911000, 945000)
PARANOIA_LEVELS: Final = (1, 2, 3, 4)
_WARMING_REQUEST: Final = HttpRequest(method=b"GET", target=b"/", protocol=b"HTTP/1.1", headers=(), body=b"")

_rules_dir = DEFAULT_CRS_RULES_DIR


class CoreRuleSetUnavailable(Exception):
    """The CRS rule files are missing or do not compile: the OWASP Core Ruleset cannot run on this machine."""


@dataclass(frozen=True, slots=True)
class CrsRule:
    """A CRS rule that scores: its id, paranoia level, message (macros as written), severity (lower case:
    critical, error, warning or notice) and tags."""

    crs_id: int
    paranoia_level: int
    message: str
    severity: str
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CrsRules:
    """What the CRS files offer, read without compiling them: the rules that score, in file order, the version,
    and each file's directives (which ``core_rule_set`` compiles without reading the files again)."""

    rules: tuple[CrsRule, ...]
    version: str
    source: Path
    files: tuple[tuple[Path, tuple[Directive, ...]], ...]


@dataclass(frozen=True, slots=True)
class CoreRuleSet:
    """The compiled CRS: the engine and the rules that score, in file order."""

    engine: RuleEngine
    rules: tuple[CrsRule, ...]
    version: str
    source: Path

    def evaluate(self, request: RequestFields, *, paranoia_level: int, disabled: frozenset[int]) -> Evaluation:
        """Runs the CRS on ``request`` at ``paranoia_level`` (CRS's executing level) without the rules in
        ``disabled`` (CRS ids). Never raises for a request's content."""
        return self._evaluate(seclang_request(request), paranoia_level, disabled)

    def warm(self) -> None:
        """Builds what the engine builds the first time a paranoia level runs (its program for that level, about a
        tenth of a second each), for every level, by evaluating an empty request at each."""
        for level in PARANOIA_LEVELS:
            self._evaluate(_WARMING_REQUEST, level, frozenset())

    def _evaluate(self, request: HttpRequest, paranoia_level: int, disabled: frozenset[int]) -> Evaluation:
        level = str(paranoia_level)
        return self.engine.evaluate(
            request,
            tx={**_CRS_SETUP, "paranoia_level": level, "executing_paranoia_level": level},
            mode="DetectionOnly",
            disabled=disabled,
        )


def use_rules_dir(path: Path) -> None:
    """Sets where the CRS rule files are read from (``waf.crs_rules_dir``); see ``catalogue.use_crs_rules_dir``,
    which callers use."""
    global _rules_dir
    if path != _rules_dir:
        _rules_dir = path
        read_crs.cache_clear()
        core_rule_set.cache_clear()


def rules_dir() -> Path:
    """Where the CRS rule files are read from."""
    return _rules_dir


def crs_installed() -> bool:
    """Whether the CRS rule files are present (they are compiled on first use, not here)."""
    return any(_rules_dir.glob("REQUEST-9*.conf"))


@functools.cache
def read_crs() -> CrsRules:
    """The rules that score of the CRS in ``rules_dir()``, read (not compiled) once per process: what the Rulesets
    API lists. Raises ``CoreRuleSetUnavailable`` when the files are missing or do not parse."""
    source = _rules_dir
    paths = _rule_files(source)
    try:
        files = tuple((path, tuple(load_rule_files([path]))) for path in paths)
        rules = tuple(_scoring_rules(files))
    except (SecLangError, OSError) as error:
        raise CoreRuleSetUnavailable(f"the OWASP Core Rule Set in {source} does not parse: {error}") from None
    return CrsRules(rules=rules, version=_crs_version(paths), source=source, files=files)


@functools.cache
def core_rule_set() -> CoreRuleSet:
    """The CRS in ``rules_dir()``, compiled once per process (a few seconds of CPU): at an edge worker's start
    (``prepare_core_rule_set``), elsewhere when a firewall first executes the OWASP Core Ruleset. Raises
    ``CoreRuleSetUnavailable`` when the files are missing or do not compile."""
    crs = compile_core_rule_set()
    log.info("OWASP Core Rule Set compiled", rules=len(crs.rules), version=crs.version, source=str(crs.source))
    return crs


def compile_core_rule_set(exclusions: Sequence[Path] = EXCLUSION_FILES) -> CoreRuleSet:
    """The CRS in ``rules_dir()`` compiled now, with the exclusion packages ``exclusions`` after its initialisation
    (edgeplane's: ``core_rule_set`` is this, once per process; a test compiles it without them to see what they
    remove). Raises ``CoreRuleSetUnavailable`` when the files are missing or do not compile."""
    listed = read_crs()
    initialisation = [item for path, file in listed.files if path.name.startswith("REQUEST-901-") for item in file]
    detection = [item for path, file in listed.files if not path.name.startswith("REQUEST-901-") for item in file]
    try:
        packages = load_rule_files(list(exclusions)) if exclusions else []
        engine = compile_rules([*initialisation, *packages, *detection], data_dir=listed.source)
    except (SecLangError, OSError) as error:
        raise CoreRuleSetUnavailable(f"the OWASP Core Rule Set in {listed.source} does not compile: {error}") from None
    return CoreRuleSet(engine=engine, rules=listed.rules, version=listed.version, source=listed.source)


def prepare_core_rule_set() -> CoreRuleSet | None:
    """Compiles the CRS of ``rules_dir()`` now, with its program for every paranoia level (``CoreRuleSet.warm``),
    unless this process did already: what an edge worker does at start, so that deploying, reconfiguring or
    undeploying the OWASP Core Ruleset later costs its configuration reload no SecLang compilation and is live
    within the propagation bound (docs/rulesets.md). None when the CRS is not installed or does not compile (logged:
    the Rulesets API does not offer it then, and a stored deployment says so in its firewall's problems)."""
    if not crs_installed():
        return None
    try:
        crs = core_rule_set()
    except CoreRuleSetUnavailable as unavailable:
        log.warning("the OWASP Core Rule Set cannot be compiled", reason=str(unavailable))
        return None
    crs.warm()
    return crs


def _rule_files(source: Path) -> list[Path]:
    paths = sorted(source.glob("REQUEST-9*.conf"))
    if not paths:
        raise CoreRuleSetUnavailable(
            f"the OWASP Core Rule Set is not installed in {source} (install the modsecurity-crs package, or set "
            "waf.crs_rules_dir)"
        )
    return paths


def seclang_request(fields: RequestFields) -> HttpRequest:
    """The request as the SecLang engine reads it, from the fields the edge built (the target as sent)."""
    query = fields.http_request_uri_query
    path = fields.http_request_uri_path
    target = f"{path}?{query}" if query else path
    return HttpRequest(
        method=fields.http_request_method.encode("latin-1", "replace"),
        target=target.encode("latin-1", "replace"),
        protocol=fields.http_request_version.encode("latin-1", "replace"),
        headers=tuple(fields.raw_headers),
        body=fields.raw_body,
        remote_addr=fields.client_ip,
    )


def _scoring_rules(files: tuple[tuple[Path, tuple[Directive, ...]], ...]) -> list[CrsRule]:
    found: list[CrsRule] = []
    for _, directives in files:
        section_level = 1
        for directive in directives:
            if not isinstance(directive, SecRule):
                continue
            if _is_level_gate(directive):
                section_level = int(directive.operator_argument.strip())
                continue
            actions = compile_actions(directive.actions, source=directive.source)
            crs_id = actions.rule_id
            if crs_id is None or crs_id not in _SCORING_IDS or actions.severity is None or actions.log is False:
                continue
            tagged = [int(tag[-1]) for tag in actions.tags if re.fullmatch(r"paranoia-level/[1-4]", tag)]
            messages = directive.action_values("msg")
            found.append(
                CrsRule(
                    crs_id=crs_id,
                    paranoia_level=tagged[0] if tagged else section_level,
                    message=messages[0] if messages else "",
                    severity=_SEVERITIES.get(actions.severity.upper(), "notice"),
                    tags=actions.tags,
                )
            )
    return found


def _is_level_gate(rule: SecRule) -> bool:
    return (
        rule.operator.lower() == "lt"
        and not rule.operator_negated
        and any(
            target.collection == "TX" and (target.selector or "").upper() == "EXECUTING_PARANOIA_LEVEL"
            for target in rule.targets
        )
        and rule.operator_argument.strip() in ("1", "2", "3", "4")
    )


def _crs_version(paths: list[Path]) -> str:
    for path in paths:
        found = re.search(r"ver:'OWASP_CRS/([0-9.]+)'", path.read_text(encoding="utf-8", errors="replace"))
        if found is not None:
            return found.group(1)
    return "unknown"
