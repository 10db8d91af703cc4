"""ModSecurity v3 with the OWASP Core Rule Set 3.3, driven in this process through libmodsecurity3's C API (ctypes).

The baseline of the WAF benchmark (``bench/waf.py``): the engine most self-hosted WAFs are, fed the same requests as
edgeplane's managed WAF, one transaction per request, the phases a web server connector runs (connection, URI,
request headers, request body, logging), stopping at the first disruptive intervention as connectors do.

Configuration: the essentials of ModSecurity's recommended ``modsecurity.conf`` (rule engine on, request body access,
body limits, JSON and XML body processors, body-parse errors blocked), Debian's ``crs-setup.conf``, the paranoia level
and the inbound anomaly threshold as CRS's own setup rules 900000 and 900110 set them, then every CRS rule file. Audit
logging, debug logging and response-body access are off: a benchmark measures inspection, not log writing.

Needs the Debian packages ``libmodsecurity3`` and ``modsecurity-crs`` (``scripts/bench-deps`` installs them).

Usage (a check, not the benchmark): ``.venv/bin/python bench/modsecurity.py [--paranoia-level 1]`` inspects one
SQL-injection query string and one JSON-RPC POST and says what ModSecurity did with each.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final

if __package__:  # python -m bench.modsecurity
    from bench.waf_requests import HttpRequest, attack_requests, benign_requests
else:  # python bench/modsecurity.py: this file's directory is on sys.path
    from waf_requests import HttpRequest, attack_requests, benign_requests

LIBRARY: Final = "libmodsecurity.so.3"
CRS_RULES: Final = Path("/usr/share/modsecurity-crs/rules")
CRS_SETUP: Final = Path("/etc/modsecurity/crs/crs-setup.conf")
CRS_EXCLUSIONS: Final = (
    Path("/etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf"),
    Path("/etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf"),
)
SERVER_ADDRESS: Final = b"127.0.0.1"
SERVER_PORT: Final = 80
CLIENT_PORT: Final = 40000

# The parts of ModSecurity's recommended modsecurity.conf that change what is inspected, with logging off. The
# 2000xx rule ids are the ones that file uses for the same rules.
ENGINE_CONFIG: Final = r"""
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRequestBodyLimitAction Reject
SecPcreMatchLimit 1000
SecPcreMatchLimitRecursion 1000
SecResponseBodyAccess Off
SecArgumentSeparator &
SecCookieFormat 0
SecAuditEngine Off
SecDebugLogLevel 0
SecStatusEngine Off
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" \
    "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" \
    "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" \
    "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.'"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation'"
"""

# CRS's setup rules (crs-setup.conf.example numbering): the paranoia level, and the anomaly score thresholds.
CRS_LEVELS: Final = """
SecAction "id:900000,phase:1,nolog,pass,t:none,setvar:tx.paranoia_level={level}"
SecAction "id:900001,phase:1,nolog,pass,t:none,setvar:tx.executing_paranoia_level={level}"
SecAction "id:900110,phase:1,nolog,pass,t:none,\\
    setvar:tx.inbound_anomaly_score_threshold={threshold},setvar:tx.outbound_anomaly_score_threshold=4"
"""


def crs_version(crs_rules: Path = CRS_RULES) -> str:
    """The Core Rule Set's version as its rules state it (``3.3.4``), or ``unknown``."""
    try:
        text = (crs_rules / "REQUEST-901-INITIALIZATION.conf").read_text(errors="replace")
    except OSError:
        return "unknown"
    found = re.search(r"ver:'OWASP_CRS/([0-9.]+)'", text)
    return found.group(1) if found else "unknown"


def rule_ids(log_line: str) -> list[str]:
    """The rule ids (``942100``) an error-log line of ModSecurity names."""
    return _RULE_ID.findall(log_line)


_RULE_ID = re.compile(r'\[id "([0-9]+)"\]')


class ModSecurityError(Exception):
    """libmodsecurity or the Core Rule Set is missing, or the rules do not load."""


class _Intervention(ctypes.Structure):
    # ModSecurityIntervention (modsecurity/intervention.h). url and log are strdup'ed by msc_intervention and
    # belong to the caller: void pointers, so that they can be handed back to free().
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
    """Gives every function of the C API used here its prototype (modsecurity/modsecurity.h, rules_set.h,
    transaction.h), so that ctypes neither truncates pointers to int nor accepts wrong arguments."""
    p, s, i, n = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
    error = ctypes.POINTER(ctypes.c_void_p)
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


def load_library(name: str = LIBRARY) -> ctypes.CDLL:
    """libmodsecurity, its C API declared; ``ModSecurityError`` if it cannot be loaded (not installed)."""
    try:
        library = ctypes.CDLL(name)
    except OSError as exc:
        raise ModSecurityError(f"cannot load {name} ({exc}): install the libmodsecurity3 package") from exc
    _declare(library)
    return library


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.free.argtypes = (ctypes.c_void_p,)
_libc.free.restype = None


class ModSecurity:
    """One ModSecurity engine with the Core Rule Set loaded at ``paranoia_level`` (1 to 4) and blocking when a
    request's inbound anomaly score reaches ``anomaly_threshold`` (CRS's default is 5: one critical match).
    ``on_log`` receives the error-log line of every rule match that logs (as a web server's error log would); without
    it the lines are formatted and dropped (libmodsecurity would otherwise print each one to standard error).

    Raises ``ModSecurityError`` if the library or the rules are missing or the rules do not load. Not thread-safe
    (one transaction at a time); ``close()`` (or ``with``) frees the engine."""

    def __init__(self, paranoia_level: int, anomaly_threshold: int = 5, *, library: str = LIBRARY,
                 crs_rules: Path = CRS_RULES, crs_setup: Path = CRS_SETUP,
                 on_log: Callable[[str], None] | None = None) -> None:  # fmt: skip
        if not 1 <= paranoia_level <= 4:
            raise ValueError(f"paranoia level {paranoia_level}: must be 1 to 4")
        if anomaly_threshold < 1:
            raise ValueError(f"anomaly threshold {anomaly_threshold}: must be at least 1")
        rule_files = sorted(crs_rules.glob("*.conf"))
        if not rule_files or not crs_setup.is_file():
            raise ModSecurityError(f"no Core Rule Set in {crs_rules} and {crs_setup}: install modsecurity-crs")
        self.paranoia_level = paranoia_level
        self.anomaly_threshold = anomaly_threshold
        self._lib = load_library(library)
        self._engine = self._lib.msc_init()
        self._rules = self._lib.msc_create_rules_set()
        if not self._engine or not self._rules:
            raise ModSecurityError("msc_init or msc_create_rules_set failed")
        self._lib.msc_set_connector_info(self._engine, b"edgeplane-bench/1.0")

        def log(_data: int | None, line: bytes | None) -> None:
            if on_log is not None and line is not None:
                on_log(line.decode(errors="replace"))

        self._log_callback = _LOG_CALLBACK(log)  # kept referenced: the library holds only the C pointer
        self._lib.msc_set_log_cb(self._engine, self._log_callback)
        try:
            self._add_text(ENGINE_CONFIG, "engine configuration")
            self._add_file(crs_setup)
            self._add_text(CRS_LEVELS.format(level=paranoia_level, threshold=anomaly_threshold), "CRS levels")
            before, after = CRS_EXCLUSIONS
            self.rule_count = sum(self._add_file(path) for path in [before, *rule_files, after] if path.is_file())
        except ModSecurityError:
            self.close()
            raise

    @property
    def version(self) -> str:
        """The library's own name and version (``ModSecurity v3.0.9 (Linux)``)."""
        who = self._lib.msc_who_am_i(self._engine)
        return bytes(who).decode() if who is not None else "ModSecurity"

    def _check(self, added: int, error: ctypes.c_void_p, what: str) -> int:
        if added < 0:
            message = ctypes.string_at(error.value).decode(errors="replace") if error.value else "unknown error"
            _libc.free(error)
            raise ModSecurityError(f"{what} does not load: {message.strip()}")
        return added

    def _add_text(self, text: str, what: str) -> int:
        error = ctypes.c_void_p()
        return self._check(self._lib.msc_rules_add(self._rules, text.encode(), ctypes.byref(error)), error, what)

    def _add_file(self, path: Path) -> int:
        error = ctypes.c_void_p()
        added = self._lib.msc_rules_add_file(self._rules, str(path).encode(), ctypes.byref(error))
        return self._check(added, error, str(path))

    def _intervened(self, transaction: int) -> int | None:
        # A fresh structure each time: msc_intervention only writes it when there is an intervention.
        intervention = _Intervention(status=200)
        if not self._lib.msc_intervention(transaction, ctypes.byref(intervention)):
            return None
        if intervention.url:
            _libc.free(intervention.url)
        if intervention.log:
            _libc.free(intervention.log)
        return int(intervention.status)

    def inspect(self, request: HttpRequest) -> int | None:
        """Runs ``request`` through the engine: the status of the disruptive intervention (403 for the anomaly-score
        block, 400 for a body that does not parse, ...), or None when the request passes. Inspection stops at the
        first intervention, as a web server connector's does; the logging phase always runs."""
        lib = self._lib
        transaction = lib.msc_new_transaction(self._engine, self._rules, None)
        if not transaction:
            raise ModSecurityError("msc_new_transaction failed")
        try:
            lib.msc_process_connection(
                transaction, request.client_ip.encode(), CLIENT_PORT, SERVER_ADDRESS, SERVER_PORT
            )
            status = self._intervened(transaction)
            if status is None:
                lib.msc_process_uri(transaction, request.uri.encode(), request.method.encode(), b"1.1")
                status = self._intervened(transaction)
            if status is None:
                for name, value in request.headers:
                    lib.msc_add_n_request_header(transaction, name, len(name), value, len(value))
                lib.msc_process_request_headers(transaction)
                status = self._intervened(transaction)
            if status is None:
                if request.body:
                    lib.msc_append_request_body(transaction, request.body, len(request.body))
                lib.msc_process_request_body(transaction)
                status = self._intervened(transaction)
            lib.msc_process_logging(transaction)
            return status
        finally:
            lib.msc_transaction_cleanup(transaction)

    def close(self) -> None:
        """Frees the rules and the engine; later calls do nothing."""
        if self._rules:
            self._lib.msc_rules_cleanup(self._rules)
            self._rules = None
        if self._engine:
            self._lib.msc_cleanup(self._engine)
            self._engine = None

    def __enter__(self) -> ModSecurity:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """The check of the module docstring: 0 when the attack is blocked and (at paranoia level 1) the JSON-RPC call
    passes, 1 otherwise or when ModSecurity is not installed."""
    parser = argparse.ArgumentParser(description="Checks that ModSecurity + CRS blocks an attack and passes JSON-RPC.")
    parser.add_argument("--paranoia-level", type=int, choices=(1, 2, 3, 4), default=1)
    args = parser.parse_args(argv)
    matched: list[str] = []
    try:
        engine = ModSecurity(args.paranoia_level, on_log=lambda line: matched.extend(rule_ids(line)))
    except ModSecurityError as exc:
        print(f"error: {exc} (scripts/bench-deps installs it)", file=sys.stderr)
        return 1
    # Above paranoia level 1, CRS is expected to block JSON-RPC too (hex strings, the strict character set).
    benign_want = None if args.paranoia_level == 1 else "either"
    failed = False
    with engine:
        print(f"{engine.version} + OWASP CRS {crs_version()} at paranoia level {args.paranoia_level}: "
              f"{engine.rule_count} rules")  # fmt: skip
        attack = next(r for r in attack_requests() if r.label == "sqli/query")
        benign = next(r for r in benign_requests() if r.label == "eth_call")
        for request, want in ((attack, 403), (benign, benign_want)):
            matched.clear()
            got = engine.inspect(request)
            failed |= want != "either" and got != want
            rules = ", ".join(matched) or "none"
            print(f"{request.method} {request.uri} [{request.label}]: {got or 'passed'} "
                  f"(expected {want or 'passed'}; rules matched: {rules})")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
