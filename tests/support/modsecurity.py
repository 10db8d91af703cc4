"""libmodsecurity (ModSecurity v3) in this process, through its C API and ctypes: the reference the SecLang engine is
checked against (the oracles of ``tests/seclang``) and the baseline of the WAF benchmark (``bench/waf.py``).

Why ctypes: the reference is the library Debian installs (``libmodsecurity3``, 3.0.9), the version the tests'
expected values were read from, and no Python library binds that one: the current binding on PyPI
(``libmodsecurity``) bundles its own build of a later version (3.0.15). So this module declares, once, the few C
functions a web server connector calls (``modsecurity/modsecurity.h``, ``rules_set.h``, ``transaction.h``,
``intervention.h``).

The parts: ``ModSecurity`` is one engine (``msc_init``), ``ModSecurity.rules(...)`` a rule set loaded from text and
files in order (the engine configuration is its first text), ``RuleSet.process_request(...)`` one transaction through
the phases a connector runs (connection, URI, request headers, request body, logging), stopping at the first
disruptive intervention, and ``Outcome`` what it did: the error-log lines of the rules that logged, their rule ids and
messages, and the intervention. Everything the library allocates for the caller is freed here.

A missing library, one without the C API, or one of another version than asked for raises ``ModSecurityUnavailable``,
which tests turn into ``pytest.skip`` (which ``tests/conftest.py`` makes a failure); rules that do not load raise
``RulesRejected``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

LIBRARY: Final = "libmodsecurity.so.3"
REFERENCE_VERSION: Final = "v3.0.9"  # Debian's libmodsecurity3: the version the tests' expected values come from
CONNECTOR: Final = b"edgeplane tests.support.modsecurity"

# modsecurity.conf-recommended's rules 200000 and 200001: the XML and JSON request body processors, chosen by
# Content-Type (the library chooses the URL-encoded and multipart ones itself).
RECOMMENDED_BODY_PROCESSORS: Final = r"""
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" \
    "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" \
    "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
"""


class ModSecurityError(Exception):
    """libmodsecurity cannot be used as asked."""


class ModSecurityUnavailable(ModSecurityError):
    """libmodsecurity is not installed, lacks its C API, or is not the version asked for (or, for callers that load
    rule files, those files are not installed)."""


class RulesRejected(ModSecurityError):
    """libmodsecurity does not load a rule text or file; the message is the library's."""


@dataclass(frozen=True)
class Intervention:
    """A disruptive action (``deny``, ``redirect``, ...): the HTTP status, and the redirect URL and log the library
    gave, if any."""

    status: int
    url: bytes | None
    log: bytes | None


@dataclass(frozen=True)
class Outcome:
    """What one transaction did: the error-log line of every rule match that logs, in order, and the intervention
    that stopped it (None when the request went through every phase). The line of the rule that intervened is the
    intervention's ``log``, not one of ``log``: the library hands it over there."""

    log: tuple[bytes, ...]
    intervention: Intervention | None

    @property
    def rule_ids(self) -> tuple[int, ...]:
        """The ids the log lines name, in order, one per line (``942100``)."""
        return tuple(int(found) for line in self.log for found in _RULE_ID.findall(line))

    def message(self, rule_id: int) -> bytes | None:
        """The ``msg`` of rule ``rule_id``'s first log line, macros expanded as the library wrote it; None when that
        rule logged nothing."""
        marker = b'[id "%d"]' % rule_id
        for line in self.log:
            at = line.find(marker)
            if at >= 0:
                start = line.index(b'[msg "', at) + len(b'[msg "')
                return line[start : line.index(b'"] [data "', start)]
        return None


_RULE_ID = re.compile(rb'\[id "([0-9]+)"\]')


class _Intervention(ctypes.Structure):
    # ModSecurityIntervention (modsecurity/intervention.h). url and log are strdup'ed by msc_intervention and belong
    # to the caller: void pointers, so that they can be handed back to free().
    _fields_ = (
        ("status", ctypes.c_int),
        ("pause", ctypes.c_int),
        ("url", ctypes.c_void_p),
        ("log", ctypes.c_void_p),
        ("disruptive", ctypes.c_int),
    )


# ModSecLogCb: (the transaction's logCbData, the rule message formatted as an error-log line).
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


def _declare(library: ctypes.CDLL) -> None:
    """Gives every function of the C API used here its prototype, so that ctypes neither truncates pointers to int
    nor accepts wrong arguments. AttributeError when one is missing."""
    p, s, i, n = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
    error = ctypes.POINTER(ctypes.c_void_p)  # const char **: strdup'ed by the library, freed here
    prototypes: dict[str, tuple[type | None, tuple[type, ...]]] = {
        "msc_init": (p, ()),
        "msc_who_am_i": (s, (p,)),
        "msc_set_connector_info": (None, (p, s)),
        "msc_set_log_cb": (None, (p, _LOG_CALLBACK)),
        "msc_cleanup": (None, (p,)),
        "msc_create_rules_set": (p, ()),
        "msc_rules_add": (i, (p, s, error)),
        "msc_rules_add_file": (i, (p, s, error)),
        "msc_rules_cleanup": (i, (p,)),
        "msc_new_transaction": (p, (p, p, p)),
        "msc_process_connection": (i, (p, s, i, s, i)),
        "msc_process_uri": (i, (p, s, s, s)),
        "msc_add_n_request_header": (i, (p, s, n, s, n)),
        "msc_process_request_headers": (i, (p,)),
        "msc_append_request_body": (i, (p, s, n)),
        "msc_process_request_body": (i, (p,)),
        "msc_intervention": (i, (p, ctypes.POINTER(_Intervention))),
        "msc_process_logging": (i, (p,)),
        "msc_transaction_cleanup": (None, (p,)),
    }
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(library, name)
        function.restype = restype
        function.argtypes = argtypes


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.free.argtypes = (ctypes.c_void_p,)
_libc.free.restype = None


def _taken(pointer: int | None) -> bytes | None:
    """The C string at ``pointer``, which the library gave to the caller, freed."""
    if not pointer:
        return None
    text = ctypes.string_at(pointer)
    _libc.free(pointer)
    return text


class ModSecurity:
    """One libmodsecurity engine. ``expected_version`` (``REFERENCE_VERSION``) refuses any other version.

    Raises ``ModSecurityUnavailable`` when the library cannot be loaded, lacks a function of the C API or is not
    the version expected. Not thread-safe (one transaction at a time); ``close()`` (or ``with``) frees the engine and
    every rule set it loaded."""

    def __init__(self, *, expected_version: str | None = None, library: str = LIBRARY) -> None:
        try:
            self._lib = ctypes.CDLL(library)
            _declare(self._lib)
        except (OSError, AttributeError) as exc:
            raise ModSecurityUnavailable(f"cannot use {library} ({exc}): install the libmodsecurity3 package") from exc
        self._engine: int | None = self._lib.msc_init()
        if not self._engine:
            raise ModSecurityUnavailable("libmodsecurity's msc_init failed")
        self._rule_sets: dict[tuple[str | Path, ...], RuleSet] = {}
        self._log: list[bytes] = []
        who = self._lib.msc_who_am_i(self._engine)
        self.version: str = who.decode() if who is not None else "ModSecurity"  # ModSecurity v3.0.9 (Linux)
        if expected_version is not None and expected_version not in self.version:
            self.close()
            raise ModSecurityUnavailable(f"the reference is libmodsecurity {expected_version}, this is {self.version}")
        self._lib.msc_set_connector_info(self._engine, CONNECTOR)
        # Kept referenced: the library holds only the C pointer. Without a callback it would print every line.
        self._log_callback = _LOG_CALLBACK(lambda _data, line: self._log.append(line or b""))
        self._lib.msc_set_log_cb(self._engine, self._log_callback)

    def rules(self, *sources: str | Path) -> RuleSet:
        """A rule set loaded from ``sources`` in order, each a rule text (``str``: the engine configuration, rules)
        or a rule file (``Path``, its ``Include``s and data files relative to it). The same sources give the same
        rule set, loaded once and kept until ``close()``.

        Raises ``RulesRejected`` with the library's message when a source does not load."""
        if sources not in self._rule_sets:
            self._rule_sets[sources] = RuleSet(self, sources)
        return self._rule_sets[sources]

    def close(self) -> None:
        """Frees every rule set and the engine; later calls do nothing."""
        for rule_set in self._rule_sets.values():
            rule_set._free()
        self._rule_sets.clear()
        if self._engine:
            self._lib.msc_cleanup(self._engine)
            self._engine = None

    def __enter__(self) -> ModSecurity:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class RuleSet:
    """Rules loaded into libmodsecurity (``msc_create_rules_set``), made by ``ModSecurity.rules``; ``rule_count`` is
    the number of rules the library reported loading, the configuration's own included."""

    def __init__(self, modsecurity: ModSecurity, sources: tuple[str | Path, ...]) -> None:
        self._modsecurity = modsecurity
        self._lib = modsecurity._lib
        self._rules: int | None = self._lib.msc_create_rules_set()
        if not self._rules:
            raise ModSecurityError("msc_create_rules_set failed")
        self.rule_count = 0
        try:
            for source in sources:
                self.rule_count += self._add(source)
        except RulesRejected:
            self._free()
            raise

    def _add(self, source: str | Path) -> int:
        error = ctypes.c_void_p()
        if isinstance(source, Path):
            added = self._lib.msc_rules_add_file(self._rules, str(source).encode(), ctypes.byref(error))
        else:
            added = self._lib.msc_rules_add(self._rules, source.encode("utf-8", "surrogateescape"), ctypes.byref(error))
        message = _taken(error.value)
        if added < 0:
            what = str(source) if isinstance(source, Path) else "rule text"
            reason = message.decode(errors="replace").strip() if message else "unknown error"
            raise RulesRejected(f"{what} does not load: {reason}")
        return int(added)

    def _free(self) -> None:
        if self._rules:
            self._lib.msc_rules_cleanup(self._rules)
            self._rules = None

    def process_request(
        self,
        method: bytes,
        uri: bytes,
        headers: Iterable[tuple[bytes, bytes]] = (),
        body: bytes = b"",
        *,
        http_version: bytes = b"1.1",
        client_ip: bytes = b"127.0.0.1",
    ) -> Outcome:
        """Runs one request through a new transaction as a web server connector does: connection (``client_ip``
        port 40000 to 127.0.0.1 port 80), URI (``uri`` as sent, ``http_version`` without ``HTTP/``), request headers,
        request body, each phase only when none before it intervened, then logging. ``ModSecurityError`` when the
        engine is closed or the library makes no transaction."""
        if not self._rules:
            raise ModSecurityError("the rule set was freed by ModSecurity.close()")
        lib, log = self._lib, self._modsecurity._log
        transaction = lib.msc_new_transaction(self._modsecurity._engine, self._rules, None)
        if not transaction:
            raise ModSecurityError("msc_new_transaction failed")
        log.clear()
        try:
            lib.msc_process_connection(transaction, client_ip, 40000, b"127.0.0.1", 80)
            intervention = self._intervention(transaction)
            if intervention is None:
                lib.msc_process_uri(transaction, uri, method, http_version)
                intervention = self._intervention(transaction)
            if intervention is None:
                for name, value in headers:
                    lib.msc_add_n_request_header(transaction, name, len(name), value, len(value))
                lib.msc_process_request_headers(transaction)
                intervention = self._intervention(transaction)
            if intervention is None:
                if body:
                    lib.msc_append_request_body(transaction, body, len(body))
                lib.msc_process_request_body(transaction)
                intervention = self._intervention(transaction)
            lib.msc_process_logging(transaction)
            return Outcome(tuple(log), intervention)
        finally:
            lib.msc_transaction_cleanup(transaction)

    def _intervention(self, transaction: int) -> Intervention | None:
        # A fresh structure each time: msc_intervention only writes it when there is an intervention.
        found = _Intervention(status=200)
        if not self._lib.msc_intervention(transaction, ctypes.byref(found)):
            return None
        return Intervention(int(found.status), _taken(found.url), _taken(found.log))
