"""SecLang rule files read into a typed model: rules (with their chains), actions and markers.

Parsing is msc-pyparser's (PyPI ``msc-pyparser``, the parser the Core Rule Set's own tooling uses to lint and
rewrite its files). It was judged usable: on the CRS 3.3.4 request files it gives every ``SecRule``, ``SecAction``
and ``SecMarker`` with the line it starts on, the targets split into collection, selector, ``!`` and ``&``, the
operator with its negation and argument as written, and every action in order. What it does not give is a model: it
returns one flat list of dictionaries, marks a chain only on the rule that carries ``chain``, and cuts action
arguments into pieces (``ctl:ruleRemoveTargetById=942450;ARGS:foo`` arrives as four fields). This module turns that
list into frozen dataclasses: a :class:`SecRule` holds the next link of its chain, an :class:`Action` holds its
whole argument again, and a ``SecAction`` is a rule without targets whose operator is ``unconditionalMatch``.
Directives that do not change how requests are evaluated (comments, ``SecComponentSignature``) are dropped; any
other directive is refused, so that a rule file the engine cannot honour fails at load, not silently. One reading
rule is added: an operator argument loses one level of backslash escaping, as Apache's configuration reader does for
ModSecurity v2 (CRS's regression suite depends on it, rule 920460).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msc_pyparser import MSCParser  # type: ignore[import-untyped]

from edgeplane.seclang.errors import RuleFileError

__all__ = [
    "Action",
    "Directive",
    "SecMarker",
    "SecRule",
    "Target",
    "load_rule_files",
    "parse_rules",
]

# Directives that configure the host server or only identify the rule set: accepted and ignored.
_IGNORED_DIRECTIVES = frozenset({"Comment", "SecComponentSignature"})


@dataclass(frozen=True, slots=True)
class Target:
    """One target of a rule: ``ARGS``, ``ARGS:foo``, ``REQUEST_COOKIES:/__utm/``, ``!ARGS:foo``, ``&TX:x``.

    ``collection`` is upper-case. ``selector`` is the key as written (``None`` for the whole collection);
    ``selector_is_regex`` when it was written ``/.../`` (the slashes are removed). ``excluded`` for ``!``
    (the selector is taken out of the rule's other targets of that collection), ``counted`` for ``&``.
    """

    collection: str
    selector: str | None = None
    selector_is_regex: bool = False
    excluded: bool = False
    counted: bool = False

    def __str__(self) -> str:
        prefix = ("!" if self.excluded else "") + ("&" if self.counted else "")
        if self.selector is None:
            return prefix + self.collection
        selector = f"/{self.selector}/" if self.selector_is_regex else self.selector
        return f"{prefix}{self.collection}:{selector}"


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a rule as written: ``name`` (``setvar``, ``t``, ``ctl``, ``msg``...) and its whole argument
    (``tx.anomaly_score_pl1=+%{tx.critical_anomaly_score}``, ``ruleRemoveTargetById=942450;ARGS:foo``; empty for
    flags such as ``capture``)."""

    name: str
    argument: str = ""


@dataclass(frozen=True, slots=True)
class SecRule:
    """A ``SecRule`` (or a ``SecAction``: no targets, operator ``unconditionalMatch``) and the links chained to it.

    ``operator`` is the name without ``@`` (``rx`` when the rule gives only a pattern); ``operator_argument`` is
    the text after it, macros not expanded. ``chained_rule`` is the next link when the rule has the ``chain``
    action. ``source`` is ``file:line`` for messages.
    """

    targets: tuple[Target, ...]
    operator: str
    operator_argument: str
    operator_negated: bool
    actions: tuple[Action, ...]
    chained_rule: SecRule | None
    source: str

    def action_values(self, name: str) -> tuple[str, ...]:
        """The arguments of every action called ``name`` (compared case-insensitively), in order."""
        lowered = name.lower()
        return tuple(action.argument for action in self.actions if action.name.lower() == lowered)

    @property
    def rule_id(self) -> int | None:
        """The ``id`` action's value, or None for a chain link (or a rule without one)."""
        values = self.action_values("id")
        if not values:
            return None
        try:
            return int(values[0])
        except ValueError as error:
            raise RuleFileError(f"{self.source}: id {values[0]!r} is not a number") from error


@dataclass(frozen=True, slots=True)
class SecMarker:
    """A ``SecMarker``: the place a ``skipAfter`` with the same name resumes after."""

    name: str
    source: str


Directive = SecRule | SecMarker


def load_rule_files(paths: Iterable[Path]) -> tuple[Directive, ...]:
    """Read the rule files in the order given and return their directives in file order.

    Raises :class:`RuleFileError` when a file cannot be read or parsed, or holds a directive the engine does not
    handle, or a chain without its next link.
    """
    directives: list[Directive] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise RuleFileError(f"{path}: cannot read the rule file: {error}") from error
        directives.extend(parse_rules(text, source=path.name))
    return tuple(directives)


def parse_rules(text: str, *, source: str = "<rules>") -> tuple[Directive, ...]:
    """Parse SecLang text into directives (rules with their chains, markers). ``source`` names the text in
    messages. Raises :class:`RuleFileError` on a syntax error, an unsupported directive or a dangling chain."""
    parser = MSCParser()
    try:
        parser.parser.parse(text)
    except Exception as error:  # msc-pyparser raises bare Exceptions on syntax errors
        raise RuleFileError(f"{source}: {error}") from error
    return _directives(parser.configlines, source)


def _directives(lines: Sequence[dict[str, Any]], source: str) -> tuple[Directive, ...]:
    directives: list[Directive] = []
    # Rules of the chain being read, starter first; linked from the last one back when the chain ends.
    pending_chain: list[tuple[dict[str, Any], str]] = []
    for line in lines:
        kind = line["type"]
        where = f"{source}:{line.get('lineno', '?')}"
        if kind in _IGNORED_DIRECTIVES:
            continue
        if kind == "SecMarker":
            if pending_chain:
                raise RuleFileError(f"{where}: SecMarker inside a chain")
            arguments = line.get("arguments") or []
            if len(arguments) != 1:
                raise RuleFileError(f"{where}: SecMarker needs one name")
            directives.append(SecMarker(name=str(arguments[0]["argument"]), source=where))
            continue
        if kind not in ("SecRule", "SecAction"):
            raise RuleFileError(f"{where}: unsupported directive {kind}")
        pending_chain.append((line, where))
        if _has_chain_action(line):
            continue
        directives.append(_link_chain(pending_chain))
        pending_chain = []
    if pending_chain:
        raise RuleFileError(f"{pending_chain[-1][1]}: the rule has chain but no rule follows")
    return tuple(directives)


def _has_chain_action(line: dict[str, Any]) -> bool:
    return any(str(action["act_name"]).lower() == "chain" for action in line.get("actions") or [])


def _link_chain(chain: list[tuple[dict[str, Any], str]]) -> SecRule:
    rule: SecRule | None = None
    for line, where in reversed(chain):
        rule = _rule(line, where, rule)
    assert rule is not None
    return rule


def _rule(line: dict[str, Any], where: str, chained_rule: SecRule | None) -> SecRule:
    actions = tuple(_action(action) for action in line.get("actions") or [])
    if line["type"] == "SecAction":
        return SecRule((), "unconditionalMatch", "", False, actions, chained_rule, where)
    targets = tuple(_target(variable, where) for variable in line.get("variables") or [])
    if not targets:
        raise RuleFileError(f"{where}: SecRule without targets")
    operator = str(line.get("operator") or "")
    argument = _unescape(str(line.get("operator_argument") or ""))
    if operator.startswith("@"):
        name = operator[1:]
    else:
        # "SecRule ARGS "pattern"": the whole text is a regular expression.
        name, argument = "rx", (operator + (" " + argument if argument else "")).strip()
    return SecRule(targets, name, argument, bool(line.get("operator_negated")), actions, chained_rule, where)


def _unescape(text: str) -> str:
    # The quoted operator argument loses one level of backslash escaping, as Apache's configuration reader
    # (substring_conf) does for ModSecurity v2, which CRS's regression suite was written against: two backslashes
    # read as one, a backslash before a double quote as the quote; any other backslash stays (a regex's \d).
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '\\"':
            out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _target(variable: dict[str, Any], where: str) -> Target:
    collection = str(variable["variable"]).upper()
    if not collection:
        raise RuleFileError(f"{where}: empty target")
    part = str(variable.get("variable_part") or "")
    if len(part) >= 2 and part[0] == part[-1] == "'":
        part = part[1:-1]
    selector: str | None = part or None
    is_regex = False
    if selector is not None and len(selector) >= 2 and selector.startswith("/") and selector.endswith("/"):
        selector, is_regex = selector[1:-1], True
    return Target(
        collection=collection,
        selector=selector,
        selector_is_regex=is_regex,
        excluded=bool(variable.get("negated")),
        counted=bool(variable.get("counter")),
    )


def _action(action: dict[str, Any]) -> Action:
    # msc-pyparser cuts "name:arg=val;param:paramval" into fields; the argument is put back together.
    argument = str(action.get("act_arg") or "")
    value = str(action.get("act_arg_val") or "")
    param = str(action.get("act_arg_val_param") or "")
    param_value = str(action.get("act_arg_val_param_val") or "")
    if value:
        argument += "=" + value
    if param:
        argument += ";" + param
    if param_value:
        argument += ":" + param_value
    return Action(name=str(action["act_name"]), argument=argument)
