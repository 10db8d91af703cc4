"""The actions of a SecLang rule: what they mean, read once from the rule's action list.

:func:`compile_actions` turns a rule's ``actions`` (as :mod:`edgeplane.seclang.rule_files` gives them) into
:class:`RuleActions`: metadata (``id``, ``phase``, ``msg``, ``logdata``, ``severity``, ``tag``), the transformation
pipeline (``t:none`` discards the ones before it), flags (``capture``, ``chain``, ``multiMatch``, ``log``/``nolog``),
the disruptive action, flow (``skip``, ``skipAfter``), variable changes (``setvar``) and per-transaction controls
(``ctl``). Texts that hold macros (``%{tx.anomaly_score}``, ``%{MATCHED_VAR}``, ``%{rule.id}``) are kept as
:class:`Macro`, expanded at run time against a :class:`MacroContext` the engine provides.

Written by hand: ModSecurity's action semantics exist only inside ModSecurity (C++) and Coraza (Go); no Python
library implements them. The behaviour follows libmodsecurity 3.0.9, which CRS 3.3.4 is tested against.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol

from edgeplane.seclang.errors import RuleFileError
from edgeplane.seclang.rule_files import Action

__all__ = [
    "Control",
    "Macro",
    "MacroContext",
    "RuleActions",
    "SetVar",
    "compile_actions",
    "modsecurity_integer",
]

SEVERITIES: Final = ("EMERGENCY", "ALERT", "CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG")
DISRUPTIVE_ACTIONS: Final = frozenset({"pass", "block", "deny", "drop", "allow", "redirect", "proxy"})
# Collections setvar may write; ModSecurity keeps IP/GLOBAL/SESSION/USER/RESOURCE across requests, this engine
# keeps them for one request (nothing persists), which is what a single evaluation can honour.
WRITABLE_COLLECTIONS: Final = frozenset({"TX", "IP", "GLOBAL", "SESSION", "USER", "RESOURCE"})

# Actions that carry no meaning for evaluating a request here (logging detail, persistence, response handling).
_IGNORED_ACTIONS: Final = frozenset(
    {
        "ver",
        "rev",
        "maturity",
        "accuracy",
        "auditlog",
        "noauditlog",
        "expirevar",
        "initcol",
        "setsid",
        "setuid",
        "status",
        "xmlns",
        "sanitisearg",
        "sanitisematched",
        "sanitisematchedbytes",
        "sanitiserequestheader",
        "sanitiseresponseheader",
        "append",
        "prepend",
        "deprecatevar",
        "exec",
        "setenv",
        "setrsc",
        "pause",
    }
)
_PHASES: Final = {"1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "request": 2, "response": 4, "logging": 5}
_MACRO: Final = re.compile(r"%\{([^}]*)\}")
_INTEGER_PREFIX: Final = re.compile(rb"\s*([+-]?\d+)")


class MacroContext(Protocol):
    """What macro expansion reads: a variable (upper-case collection, optional key) as the engine sees it now."""

    def macro_value(self, collection: str, key: str | None) -> bytes:
        """The first value of ``collection`` (``key`` selects one member), or ``b""`` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class Macro:
    """A text with ``%{COLLECTION}`` / ``%{COLLECTION.key}`` references, split once into literal parts and
    references (collection upper-case, key as written)."""

    parts: tuple[bytes | tuple[str, str | None], ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> Macro:
        """Split ``text``; never raises (an unclosed ``%{`` is literal text)."""
        parts: list[bytes | tuple[str, str | None]] = []
        position = 0
        for match in _MACRO.finditer(text):
            if match.start() > position:
                parts.append(text[position : match.start()].encode("utf-8"))
            name = match.group(1).strip()
            collection, _, key = name.partition(".")
            parts.append((collection.upper(), key or None))
            position = match.end()
        if position < len(text):
            parts.append(text[position:].encode("utf-8"))
        return cls(tuple(parts), text)

    @property
    def is_constant(self) -> bool:
        """True when the text holds no reference."""
        return all(isinstance(part, bytes) for part in self.parts)

    def expand(self, context: MacroContext) -> bytes:
        """The text with each reference replaced by its value (empty when the variable is absent)."""
        parts = self.parts
        if len(parts) == 1 and isinstance(parts[0], bytes):  # a constant text (most setvar names, many msgs)
            return parts[0]
        out: list[bytes] = []
        for part in parts:
            if isinstance(part, bytes):
                out.append(part)
            else:
                out.append(context.macro_value(part[0], part[1]))
        return b"".join(out)


@dataclass(frozen=True, slots=True)
class SetVar:
    """``setvar:[!]collection.name[=value|=+value|=-value]``. ``operation`` is one of ``set``, ``add``,
    ``subtract``, ``delete``; the name and the value may hold macros."""

    collection: str
    name: Macro
    operation: str
    value: Macro

    def apply(self, collections: dict[str, dict[str, bytes]], context: MacroContext) -> None:
        """Change the variable in ``collections`` (keys lower-case within each upper-case collection) as
        ModSecurity does: arithmetic on integers parsed as C's ``stoi`` would (0 when there is no number)."""
        target = collections.setdefault(self.collection, {})
        name = self.name.expand(context).decode("latin-1").lower()
        if self.operation == "delete":
            target.pop(name, None)
            return
        value = self.value.expand(context)
        if self.operation == "set":
            target[name] = value
            return
        current = modsecurity_integer(target.get(name, b"0"))
        operand = modsecurity_integer(value)
        result = current + operand if self.operation == "add" else current - operand
        target[name] = str(result).encode("ascii")


@dataclass(frozen=True, slots=True)
class Control:
    """``ctl:option=value[;target]``: ``option`` as written (``ruleRemoveById``, ``ruleRemoveTargetByTag``,
    ``requestBodyProcessor``, ``ruleEngine``...), ``value`` the text after ``=`` and ``target`` the variable after
    ``;`` (``ARGS:foo``) for the target-removing options."""

    option: str
    value: str
    target: str | None = None


@dataclass(frozen=True, slots=True)
class RuleActions:
    """Everything a rule's (or chain link's) actions say, read once."""

    rule_id: int | None = None
    phase: int | None = None
    msg: Macro | None = None
    logdata: Macro | None = None
    severity: str | None = None
    tags: tuple[str, ...] = ()
    transformations: tuple[str, ...] = ()
    resets_transformations: bool = False
    capture: bool = False
    chain: bool = False
    multi_match: bool = False
    log: bool | None = None
    disruptive: str | None = None
    skip: int = 0
    skip_after: str | None = None
    setvars: tuple[SetVar, ...] = ()
    controls: tuple[Control, ...] = field(default_factory=tuple)


def compile_actions(actions: Iterable[Action], *, source: str = "<rule>") -> RuleActions:
    """Read a rule's actions. Raises :class:`RuleFileError` for an unknown action or a malformed argument
    (transformation names are checked by the engine, which owns the transformation table)."""
    rule_id: int | None = None
    phase: int | None = None
    msg: Macro | None = None
    logdata: Macro | None = None
    severity: str | None = None
    tags: list[str] = []
    transformations: list[str] = []
    resets = False
    capture = chain = multi_match = False
    log: bool | None = None
    disruptive: str | None = None
    skip = 0
    skip_after: str | None = None
    setvars: list[SetVar] = []
    controls: list[Control] = []
    for action in actions:
        name = action.name.lower()
        argument = action.argument
        if name == "id":
            rule_id = _integer(argument, "id", source)
        elif name == "phase":
            if argument.lower() not in _PHASES:
                raise RuleFileError(f"{source}: unknown phase {argument!r}")
            phase = _PHASES[argument.lower()]
        elif name == "msg":
            msg = Macro.parse(argument)
        elif name == "logdata":
            logdata = Macro.parse(argument)
        elif name == "severity":
            severity = _severity(argument, source)
        elif name == "tag":
            tags.append(argument)
        elif name == "t":
            if argument.lower() == "none":
                transformations.clear()
                resets = True
            else:
                transformations.append(argument)
        elif name == "capture":
            capture = True
        elif name == "chain":
            chain = True
        elif name == "multimatch":
            multi_match = True
        elif name == "log":
            log = True
        elif name == "nolog":
            log = False
        elif name in DISRUPTIVE_ACTIONS:
            disruptive = name
        elif name == "skip":
            skip = _integer(argument, "skip", source)
        elif name == "skipafter":
            skip_after = argument
        elif name == "setvar":
            setvars.append(_setvar(argument, source))
        elif name == "ctl":
            controls.append(_control(argument, source))
        elif name not in _IGNORED_ACTIONS:
            raise RuleFileError(f"{source}: unsupported action {action.name!r}")
    return RuleActions(
        rule_id=rule_id,
        phase=phase,
        msg=msg,
        logdata=logdata,
        severity=severity,
        tags=tuple(tags),
        transformations=tuple(transformations),
        resets_transformations=resets,
        capture=capture,
        chain=chain,
        multi_match=multi_match,
        log=log,
        disruptive=disruptive,
        skip=skip,
        skip_after=skip_after,
        setvars=tuple(setvars),
        controls=tuple(controls),
    )


def modsecurity_integer(value: bytes) -> int:
    """The integer at the start of ``value`` (leading blanks and a sign allowed), 0 when there is none: how
    ModSecurity reads numbers for ``setvar`` arithmetic."""
    if value.isdigit():  # CRS's scores and weights: no regex needed
        return int(value)
    match = _INTEGER_PREFIX.match(value)
    return int(match.group(1)) if match else 0


def _integer(text: str, what: str, source: str) -> int:
    try:
        return int(text.strip())
    except ValueError as error:
        raise RuleFileError(f"{source}: {what} {text!r} is not a number") from error


def _severity(text: str, source: str) -> str:
    upper = text.strip().upper()
    if upper in SEVERITIES:
        return upper
    if upper.isdigit() and int(upper) < len(SEVERITIES):
        return SEVERITIES[int(upper)]
    raise RuleFileError(f"{source}: unknown severity {text!r}")


def _setvar(text: str, source: str) -> SetVar:
    text = text.strip()
    if text.startswith("!"):
        variable, operation, value = text[1:], "delete", ""
    elif "=" in text:
        variable, _, value = text.partition("=")
        operation = "set"
        if value.startswith("+"):
            operation, value = "add", value[1:]
        elif value.startswith("-"):
            operation, value = "subtract", value[1:]
    else:
        variable, operation, value = text, "set", "1"
    collection, dot, name = variable.partition(".")
    if not dot or not name or collection.upper() not in WRITABLE_COLLECTIONS:
        raise RuleFileError(f"{source}: setvar {text!r} does not name a variable of a writable collection")
    return SetVar(collection.upper(), Macro.parse(name), operation, Macro.parse(value))


def _control(text: str, source: str) -> Control:
    option, equals, rest = text.partition("=")
    if not equals:
        raise RuleFileError(f"{source}: ctl {text!r} has no value")
    value, semicolon, target = rest.partition(";")
    return Control(option.strip(), value.strip(), target.strip() if semicolon else None)
