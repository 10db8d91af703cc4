"""ModSecurity v3 with the OWASP Core Rule Set 3.3 as the WAF benchmark (``bench/waf.py``) configures it.

The baseline of the benchmark: the engine most self-hosted WAFs are, fed the same requests as edgeplane's managed WAF,
one transaction per request through the phases a web server connector runs (connection, URI, request headers,
request body, logging), stopping at the first disruptive intervention as connectors do. libmodsecurity3 is driven
in this process through its C API by ``tests/support/modsecurity.py``; this module holds the configuration.

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
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final

if __package__:  # python -m bench.modsecurity
    from bench.waf_requests import HttpRequest, attack_requests, benign_requests
else:  # python bench/modsecurity.py: this file's directory is on sys.path, the repository's is not
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from waf_requests import HttpRequest, attack_requests, benign_requests
from tests.support import modsecurity as libmodsecurity
from tests.support.modsecurity import RECOMMENDED_BODY_PROCESSORS, ModSecurityError, Outcome

CRS_RULES: Final = Path("/usr/share/modsecurity-crs/rules")
CRS_SETUP: Final = Path("/etc/modsecurity/crs/crs-setup.conf")
CRS_EXCLUSIONS: Final = (
    Path("/etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf"),
    Path("/etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf"),
)

# The parts of ModSecurity's recommended modsecurity.conf that change what is inspected, with logging off. The
# 2000xx rule ids are the ones that file uses for the same rules.
ENGINE_CONFIG: Final = (
    r"""
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
"""
    + RECOMMENDED_BODY_PROCESSORS
    + r"""
SecRule REQBODY_ERROR "!@eq 0" \
    "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.'"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation'"
"""
)

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


class ModSecurity:
    """libmodsecurity with the Core Rule Set loaded at ``paranoia_level`` (1 to 4) and blocking when a request's
    inbound anomaly score reaches ``anomaly_threshold`` (CRS's default is 5: one critical match).

    Raises ``ValueError`` for a level or threshold out of range, ``ModSecurityError`` when the library or the rules
    are missing (``ModSecurityUnavailable``) or the rules do not load (``RulesRejected``). Not thread-safe (one
    transaction at a time); ``close()`` (or ``with``) frees the engine."""

    def __init__(self, paranoia_level: int, anomaly_threshold: int = 5, *, crs_rules: Path = CRS_RULES,
                 crs_setup: Path = CRS_SETUP) -> None:  # fmt: skip
        if not 1 <= paranoia_level <= 4:
            raise ValueError(f"paranoia level {paranoia_level}: must be 1 to 4")
        if anomaly_threshold < 1:
            raise ValueError(f"anomaly threshold {anomaly_threshold}: must be at least 1")
        rule_files = sorted(crs_rules.glob("*.conf"))
        if not rule_files or not crs_setup.is_file():
            raise libmodsecurity.ModSecurityUnavailable(
                f"no Core Rule Set in {crs_rules} and {crs_setup}: install modsecurity-crs"
            )
        self.paranoia_level = paranoia_level
        self.anomaly_threshold = anomaly_threshold
        self._engine = libmodsecurity.ModSecurity()
        self.version = self._engine.version
        levels = CRS_LEVELS.format(level=paranoia_level, threshold=anomaly_threshold)
        before, after = CRS_EXCLUSIONS
        files = [path for path in [before, *rule_files, after] if path.is_file()]
        try:
            self._rules = self._engine.rules(ENGINE_CONFIG, crs_setup, levels, *files)
        except ModSecurityError:
            self._engine.close()
            raise
        self.rule_count = self._rules.rule_count

    def process_request(self, request: HttpRequest) -> Outcome:
        """Runs ``request`` through the engine as a web server connector does (``RuleSet.process_request``): the
        rules' log lines and the intervention that stopped it, if any."""
        return self._rules.process_request(request.method.encode(), request.uri.encode(), request.headers,
                                           request.body, client_ip=request.client_ip.encode())  # fmt: skip

    def inspect(self, request: HttpRequest) -> int | None:
        """The status of the disruptive intervention on ``request`` (403 for the anomaly-score block, 400 for a body
        that does not parse, ...), or None when the request passes."""
        intervention = self.process_request(request).intervention
        return intervention.status if intervention is not None else None

    def close(self) -> None:
        """Frees the rules and the engine; later calls do nothing."""
        self._engine.close()

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
    try:
        engine = ModSecurity(args.paranoia_level)
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
            outcome = engine.process_request(request)
            got = outcome.intervention.status if outcome.intervention is not None else None
            failed |= want != "either" and got != want
            rules = ", ".join(map(str, outcome.rule_ids)) or "none"
            print(f"{request.method} {request.uri} [{request.label}]: {got or 'passed'} "
                  f"(expected {want or 'passed'}; rules matched: {rules})")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
