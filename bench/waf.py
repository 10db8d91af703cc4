"""The managed WAF against ModSecurity v3 with the OWASP Core Rule Set 3.3: cost per request and what each blocks.

Both engines run in this process, one request at a time, on the same requests (``bench/waf_requests.py``): a benign
mix of JSON-RPC POSTs to ``/v1/mainnet`` (single calls and batches from web3.py, ethers, viem and curl, hex
parameters) and a few GETs, and an attack mix (SQL injection, XSS, path traversal, log4j, command injection, PHP and
Java code, each in the query string, four headers and a JSON-RPC parameter).

- ``modsecurity``: libmodsecurity3 through its C API (``tests/support/modsecurity.py``), configured by
  ``bench/modsecurity.py``: a transaction per request, fed as a web server connector feeds it (connection, URI,
  headers, body, logging), CRS in anomaly-scoring mode at the paranoia level, blocking at ``--threshold``;
- ``edgeplane``: ``compile_firewall`` with the ``http_request_firewall_managed`` entrypoint a zone deploys: execute
  the Managed Ruleset and the OWASP Core Ruleset, the core ruleset's categories above the paranoia level disabled
  and the score rule's ``score_threshold`` set to ``--threshold``; per request ``RequestFields.from_http`` (building
  the fields is part of the cost, as feeding the transaction is ModSecurity's) and ``Firewall.evaluate``.

Per paranoia level and mix, each round times ``--repeat`` passes over the mix for each engine, in alternating order
(ModSecurity first in even rounds); the figures are the medians over ``--rounds`` rounds of the CPU time per request
(``time.process_time``: this process's CPU, so other work on the machine moves it less than wall time) and the ratio
ModSecurity time / edgeplane time of the same round. An unmeasured pass first records what each engine blocks: the
detection rate on the attack mix (by attack kind) and the false positives on the benign mix (by request kind), with
the CRS rules behind ModSecurity's false positives.

Needs ``scripts/bench-deps`` (the Debian packages libmodsecurity3 and modsecurity-crs).

Usage: ``.venv/bin/python bench/waf.py [--paranoia-level 1 --paranoia-level 4] [--threshold 5] [--rounds 5]
[--repeat 2] [--benign 200] [--json]``
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

if __package__:  # python -m bench.waf
    from bench import modsecurity
    from bench.waf_requests import HttpRequest, attack_requests, benign_requests
else:  # python bench/waf.py: this file's directory is on sys.path
    import modsecurity
    from waf_requests import HttpRequest, attack_requests, benign_requests
# The repository's root is on sys.path: the working directory under -m, bench/modsecurity.py's doing otherwise.
from tests.support.modsecurity import ModSecurityError, Outcome

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT / "src") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "src"))

PARANOIA_LEVELS: Final = (1, 4)
MANAGED_RULESET_ID: Final = "efb7b8c949ac4650a09736fc376e9aee"
OWASP_RULESET_ID: Final = "4814384a9e5d4991b9815dcfc25d2f1f"
OWASP_SCORE_RULE_ID: Final = "6179ae15870a4bb7b2d480d4843b323c"

Inspect = Callable[[HttpRequest], bool]  # True: the engine blocks the request


# -- the two engines -----------------------------------------------------------------------------------------------


class RuleIdCollector:
    """Takes every ModSecurity outcome: keeps the CRS rule ids of its matches while ``active`` (the detection pass
    only)."""

    def __init__(self) -> None:
        self.active = False
        self.current: list[int] = []

    def __call__(self, outcome: Outcome) -> None:
        if self.active:
            self.current.extend(outcome.rule_ids)


def modsecurity_engine(level: int, threshold: int, collector: RuleIdCollector) -> tuple[modsecurity.ModSecurity,
                                                                                         Inspect]:  # fmt: skip
    """ModSecurity with CRS at ``level``, and its blocking predicate. Raises ``ModSecurityError`` when it is not
    installed."""
    engine = modsecurity.ModSecurity(level, threshold)

    def inspect(request: HttpRequest) -> bool:
        outcome = engine.process_request(request)
        collector(outcome)
        return outcome.intervention is not None

    return engine, inspect


def edgeplane_rules(level: int, threshold: int) -> list[dict[str, Any]]:
    """The ``http_request_firewall_managed`` entrypoint rules of a zone that deploys the Managed Ruleset and the OWASP
    Core Ruleset at paranoia level ``level`` with the anomaly threshold ``threshold``."""
    above = [{"category": f"paranoia-level-{n}", "enabled": False} for n in range(level + 1, 5)]
    owasp_overrides: dict[str, Any] = {"rules": [{"id": OWASP_SCORE_RULE_ID, "score_threshold": threshold}]}
    if above:
        owasp_overrides["categories"] = above
    return [
        {
            "action": "execute",
            "expression": "true",
            "description": "Managed Ruleset",
            "enabled": True,
            "action_parameters": {"id": MANAGED_RULESET_ID},
        },
        {
            "action": "execute",
            "expression": "true",
            "description": f"OWASP Core Ruleset, paranoia level {level}, threshold {threshold}",
            "enabled": True,
            "action_parameters": {"id": OWASP_RULESET_ID, "overrides": owasp_overrides},
        },
    ]


def edgeplane_engine(level: int, threshold: int) -> tuple[Inspect | None, str]:
    """edgeplane's managed WAF at ``level`` and ``threshold``, and a description; ``(None, why)`` when
    ``edgeplane.waf.firewall`` or ``edgeplane.rules.RequestFields`` cannot be used (not written yet)."""
    try:
        from edgeplane.rules import RequestFields
        from edgeplane.waf.firewall import compile_firewall
    except ImportError as exc:
        return None, f"edgeplane WAF not available ({exc})"
    try:
        firewall = compile_firewall({"http_request_firewall_managed": edgeplane_rules(level, threshold)})
    except Exception as exc:  # whatever it raises, the ModSecurity half still runs
        return None, f"edgeplane WAF not available (compile_firewall: {type(exc).__name__}: {exc})"
    if firewall.problems:  # rules left out: the figures would not be the rulesets' own
        return None, f"edgeplane WAF not usable: {len(firewall.problems)} rules left out: {firewall.problems[0]}"
    from_http = RequestFields.from_http
    evaluate = firewall.evaluate

    def inspect(request: HttpRequest) -> bool:
        fields = from_http(method=request.method, scheme="https", host=request.host, raw_path=request.path,
                           query=request.query, headers=request.headers, body=request.body,
                           client_ip=request.client_ip)  # fmt: skip
        return evaluate(fields).blocked  # a challenge counts: it is answered as a block

    return inspect, f"edgeplane managed WAF ({_edgeplane_rule_counts()})"


def _edgeplane_rule_counts() -> str:
    try:
        from edgeplane.waf.catalogue import load_catalogue

        catalogue = load_catalogue()
        managed, core = len(catalogue[MANAGED_RULESET_ID].rules), len(catalogue[OWASP_RULESET_ID].rules)
    except Exception:  # only a description: the rulesets compiled, whatever the catalogue's interface now is
        return "Managed Ruleset + OWASP Core Ruleset"
    return f"Managed Ruleset, {managed} rules + OWASP Core Ruleset, {core} rules"


# -- measuring -----------------------------------------------------------------------------------------------------


@dataclass
class MixResult:
    """One engine on one mix at one paranoia level."""

    blocked: int = 0
    blocked_by_label: dict[str, int] = field(default_factory=dict)
    cpu_us: list[float] = field(default_factory=list)  # per request, one entry per round
    wall_us: list[float] = field(default_factory=list)


def _detect(inspect: Inspect, requests: Sequence[HttpRequest]) -> MixResult:
    result = MixResult()
    counts: collections.Counter[str] = collections.Counter()
    for request in requests:
        if inspect(request):
            counts[request.label] += 1
    result.blocked = sum(counts.values())
    result.blocked_by_label = dict(counts)
    return result


def _timed(inspect: Inspect, requests: Sequence[HttpRequest], repeat: int) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        for request in requests:
            inspect(request)
    count = repeat * len(requests)
    return (time.process_time() - cpu) / count * 1e6, (time.perf_counter() - wall) / count * 1e6


def measure_level(level: int, args: argparse.Namespace, mixes: Mapping[str, Sequence[HttpRequest]],
                  progress: bool) -> dict[str, Any]:  # fmt: skip
    """Both engines at ``level`` on every mix: detection counts, then ``args.rounds`` timed rounds."""
    collector = RuleIdCollector()
    modsec, modsec_inspect = modsecurity_engine(level, args.threshold, collector)
    engines: dict[str, Inspect] = {"modsecurity": modsec_inspect}
    edgeplane_inspect, edgeplane_note = edgeplane_engine(level, args.threshold)
    if edgeplane_inspect is not None:
        engines["edgeplane"] = edgeplane_inspect
    results: dict[str, dict[str, MixResult]] = {}
    false_positive_rules: collections.Counter[int] = collections.Counter()
    with modsec:
        for mix, requests in mixes.items():
            # The detection pass, unmeasured: ModSecurity's rule ids are collected for the benign mix only.
            collector.active = mix == "benign"
            results[mix] = {}
            for name, inspect in engines.items():
                collector.current = []
                results[mix][name] = _detect(inspect, requests)
                if name == "modsecurity" and mix == "benign":
                    false_positive_rules.update(collector.current)
            collector.active = False
            for round_ in range(args.rounds):
                order = list(engines.items())
                for name, inspect in order if round_ % 2 == 0 else order[::-1]:
                    cpu_us, wall_us = _timed(inspect, requests, args.repeat)
                    results[mix][name].cpu_us.append(cpu_us)
                    results[mix][name].wall_us.append(wall_us)
                if progress:
                    line = ", ".join(f"{name} {results[mix][name].cpu_us[-1]:.0f} µs" for name in engines)
                    print(f"PL{level} {mix} round {round_ + 1}/{args.rounds}: {line}", file=sys.stderr, flush=True)
        version = modsec.version
    document: dict[str, Any] = {
        "paranoia_level": level,
        "modsecurity": version,
        "edgeplane": edgeplane_note,
        "mixes": {},
        "modsecurity_benign_rule_matches": dict(false_positive_rules.most_common()),
    }
    for mix, by_engine in results.items():
        entry: dict[str, Any] = {"requests": len(mixes[mix])}
        for name, result in by_engine.items():
            entry[name] = {
                "blocked": result.blocked,
                "blocked_by_label": result.blocked_by_label,
                "cpu_us_per_request": round(statistics.median(result.cpu_us), 1),
                "cpu_us_per_request_min": round(min(result.cpu_us), 1),
                "wall_us_per_request": round(statistics.median(result.wall_us), 1),
            }
        if "edgeplane" in by_engine:
            ratios = [
                m / e for m, e in zip(by_engine["modsecurity"].cpu_us, by_engine["edgeplane"].cpu_us, strict=True)
            ]
            entry["ratio_modsecurity_over_edgeplane"] = round(statistics.median(ratios), 2)
        document["mixes"][mix] = entry
    return document


# -- reporting -----------------------------------------------------------------------------------------------------


def _share(blocked: int, total: int) -> str:
    return f"{blocked}/{total} ({100 * blocked / total:.0f} %)" if total else "-"


def _by_part(labels: Mapping[str, int], requests: Sequence[HttpRequest], part: int) -> dict[str, tuple[int, int]]:
    # An attack's label is "kind/place": part 0 groups by kind, part 1 by place.
    totals = collections.Counter(r.label.split("/")[part] for r in requests)
    blocked: collections.Counter[str] = collections.Counter()
    for label, count in labels.items():
        blocked[label.split("/")[part]] += count
    return {key: (blocked[key], total) for key, total in totals.items()}


def _print_attack_table(levels: list[dict[str, Any]], requests: Sequence[HttpRequest], part: int) -> None:
    keys = list(dict.fromkeys(r.label.split("/")[part] for r in requests))
    width = max(9, *(len(key) + 1 for key in keys))
    header = " ".join(f"{key:>{width}}" for key in keys)
    print(f"{'PL':>2} {'engine':<12} {header}")
    for level in levels:
        entry = level["mixes"]["attack"]
        for name in ("modsecurity", "edgeplane"):
            if name in entry:
                shares = _by_part(entry[name]["blocked_by_label"], requests, part)
                row = " ".join(f"{f'{shares[key][0]}/{shares[key][1]}':>{width}}" for key in keys)
                print(f"{level['paranoia_level']:>2} {name:<12} {row}")


def print_report(levels: list[dict[str, Any]], mixes: Mapping[str, Sequence[HttpRequest]],
                 args: argparse.Namespace, command: str) -> None:  # fmt: skip
    """The tables: cost and blocks per level and mix, detection by attack kind, false positives by request kind."""
    first = levels[0]
    print(f"{first['modsecurity']} + OWASP CRS {modsecurity.crs_version()} (anomaly scoring) vs {first['edgeplane']}")
    print(f"threshold {args.threshold}; CPU µs per request, median of {args.rounds} rounds of {args.repeat} passes; "
          "one thread, in process")  # fmt: skip
    print()
    print(f"{'PL':>2} {'mix':<7} {'requests':>8} {'ModSecurity µs':>15} {'edgeplane µs':>13} {'ratio':>6} "
          f"{'ModSecurity blocks':>19} {'edgeplane blocks':>17}")  # fmt: skip
    for level in levels:
        for mix, entry in level["mixes"].items():
            total = entry["requests"]
            modsec = entry["modsecurity"]
            edge = entry.get("edgeplane")
            edge_us = f"{edge['cpu_us_per_request']:,.1f}" if edge else "-"
            edge_blocks = _share(edge["blocked"], total) if edge else "-"
            ratio = f"{entry['ratio_modsecurity_over_edgeplane']:.1f}" if edge else "-"
            print(f"{level['paranoia_level']:>2} {mix:<7} {total:>8} {modsec['cpu_us_per_request']:>15,.1f} "
                  f"{edge_us:>13} {ratio:>6} {_share(modsec['blocked'], total):>19} {edge_blocks:>17}")  # fmt: skip
    if "attack" in mixes:
        print()
        print("attack mix, blocked by kind:")
        _print_attack_table(levels, mixes["attack"], 0)
        print()
        print("attack mix, blocked by where the payload is:")
        _print_attack_table(levels, mixes["attack"], 1)
    if "benign" in mixes:
        print()
        print("benign mix, false positives by request kind:")
        for level in levels:
            entry = level["mixes"]["benign"]
            for name in ("modsecurity", "edgeplane"):
                if name in entry:
                    labels = entry[name]["blocked_by_label"]
                    text = ", ".join(f"{label} {count}" for label, count in sorted(labels.items())) or "none"
                    print(f"  PL{level['paranoia_level']} {name}: {text}")
            rules = level["modsecurity_benign_rule_matches"]
            if rules:
                top = ", ".join(f"{rule} x{count}" for rule, count in list(rules.items())[:8])
                print(f"  PL{level['paranoia_level']} CRS rules matching benign requests: {top}")
    if any("edgeplane" not in level["mixes"][mix] for level in levels for mix in level["mixes"]):
        print()
        print(first["edgeplane"])
    print()
    print(f"reproduce: {command}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; exits with a usage message (status 2) when a value is out of range."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--paranoia-level", type=int, action="append", choices=(1, 2, 3, 4),
                        help="a paranoia level to measure; repeatable (default 1 and 4)")  # fmt: skip
    parser.add_argument("--threshold", type=int, default=5,
                        help="inbound anomaly threshold of both engines (default 5: one critical match)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per level and mix (default 5)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the mix per round (default 2)")
    parser.add_argument("--benign", type=int, default=200, help="requests in the benign mix (default 200)")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON document at the end")
    parser.add_argument("--quiet", action="store_true", help="no per-round progress on stderr")
    args = parser.parse_args(argv)
    args.paranoia_level = tuple(dict.fromkeys(args.paranoia_level or PARANOIA_LEVELS))
    if not 1 <= args.threshold <= 1000:
        parser.error("--threshold must be in [1, 1000]")
    if not 1 <= args.rounds <= 50:
        parser.error("--rounds must be in [1, 50]")
    if not 1 <= args.repeat <= 100:
        parser.error("--repeat must be in [1, 100]")
    if not 1 <= args.benign <= 10_000:
        parser.error("--benign must be in [1, 10000]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark and prints its tables (and ``--json``); 1 when ModSecurity or the CRS is not installed."""
    args = parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join([".venv/bin/python", "bench/waf.py", *given])
    mixes = {"benign": benign_requests(args.benign), "attack": attack_requests()}
    try:
        levels = [measure_level(level, args, mixes, progress=not args.quiet) for level in args.paranoia_level]
    except ModSecurityError as exc:
        print(f"error: {exc} (scripts/bench-deps installs it)", file=sys.stderr)
        return 1
    print_report(levels, mixes, args, command)
    if args.json:
        print(json.dumps({"command": command, "threshold": args.threshold, "levels": levels}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
