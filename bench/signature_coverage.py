"""What the hand-written OWASP-style Core Ruleset blocked that the Managed Ruleset and the real CRS do not: an
analysis, not a benchmark (no timing).

Until commit 95c8f3a edgeplane's OWASP Core Ruleset was its own anomaly-scoring signatures in CRS style
(``src/edgeplane/waf/managed/owasp_core.toml``, 369 rules); it is now CRS 3.3.4 compiled by ``edgeplane.seclang``.
Nothing the old signatures caught may be lost: what they caught that CRS misses belongs in the Managed Ruleset. This
script measures that, on every attack payload the project holds:

- the payload lists of the WAF tests (``tests/waf/corpus.py``: ``TYPICAL``, ``BLATANT``, ``PARTIAL``; the
  signature payloads of ``tests/waf/signature_payloads.py``) and of the WAF benchmark (``bench/waf_requests.py``
  ``PAYLOADS``), each placed in the query string, a JSON-RPC parameter, the User-Agent, Referer, Cookie and
  X-Api-Version headers (``tests.waf.corpus.placed``, as ``bench/waf_requests.py`` places them);
- the whole-request attacks of ``tests/waf/corpus.py`` ``ATTACKS``, as they are.

Each request is judged by four engines:

- ``old core``: the old Core Ruleset read from git (``95c8f3a^``), each rule's expression compiled by
  ``edgeplane.rules``; at paranoia level N the rules of levels 1..N add their severity's score once (as the firewall
  scored them), and the request is blocked when the sum reaches the threshold;
- ``old managed``: the Managed Ruleset as it was at that commit, blocked when a rule whose action is ``block``
  matches;
- ``managed``: the Managed Ruleset of the working tree, through ``compile_firewall`` (a zone's default deployment);
- ``crs``: the OWASP Core Ruleset as the firewall runs it (CRS 3.3.4 from ``/usr/share/modsecurity-crs/rules`` with
  edgeplane's JSON-RPC exclusions, one score per rule that fired), blocked at the same threshold.

For each threshold (``--threshold``, by default the API's sensitivities 25, 40 and 60) and paranoia level, it prints
how many requests ``old managed + old core`` blocked (``before``), how many ``old managed + crs`` block (CRS without
the signatures ported into the Managed Ruleset, and how many of ``before`` it misses) and how many ``managed + crs``
block (``after``), and lists each request ``before`` blocked and ``after`` does not (a gap), with the old rules that
matched it. The target is no gap at all.

Usage: ``.venv/bin/python bench/signature_coverage.py [--threshold 40 ...] [--paranoia-level 1 ...] [--json]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
for entry in (REPO_ROOT, REPO_ROOT / "src"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from bench.waf_requests import PAYLOADS  # noqa: E402

from edgeplane.rules import RequestFields, compile_expression  # noqa: E402
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_SCORE_RULE_ID, SEVERITY_SCORES  # noqa: E402
from edgeplane.waf.firewall import Firewall, compile_firewall, deploy_managed_rulesets  # noqa: E402
from tests.waf.corpus import ATTACKS, BLATANT, PARTIAL, PLACES, TYPICAL, placed  # noqa: E402
from tests.waf.signature_payloads import SIGNATURE_PAYLOADS  # noqa: E402

OLD_COMMIT: Final = "95c8f3a^"  # the last commit with the hand-written Core Ruleset
OLD_CORE_PATH: Final = "src/edgeplane/waf/managed/owasp_core.toml"
OLD_MANAGED_PATH: Final = "src/edgeplane/waf/managed/managed.toml"
PARANOIA_LEVELS: Final = (1, 2, 3, 4)
THRESHOLDS: Final = (25, 40, 60)


@dataclass(frozen=True, slots=True)
class OldRule:
    """One rule of a ruleset read from git: its id, description, paranoia level (1 when it has none), anomaly
    score (0 when it does not score), action and compiled expression."""

    id: str
    description: str
    paranoia_level: int
    score: int
    action: str
    predicate: Callable[[RequestFields], bool]


@dataclass(frozen=True, slots=True)
class AttackRequest:
    """One attack request: a name (``place: payload`` or the corpus sample's name) and its fields."""

    name: str
    fields: RequestFields


@dataclass(slots=True)
class Judgement:
    """What each engine made of one request."""

    request: AttackRequest
    old_matches: list[OldRule] = field(default_factory=list)  # old Core rules that matched (scoring rules only)
    old_managed: bool = False
    managed: bool = False
    crs_scores: dict[int, int] = field(default_factory=dict)  # by paranoia level

    def old_core_score(self, level: int) -> int:
        """The old Core Ruleset's anomaly score at ``level``."""
        return sum(rule.score for rule in self.old_matches if rule.paranoia_level <= level)

    def before(self, level: int, threshold: int) -> bool:
        """Blocked by the old Managed Ruleset or the old Core Ruleset at ``level`` and ``threshold``."""
        return self.old_managed or self.old_core_score(level) >= threshold

    def unported(self, level: int, threshold: int) -> bool:
        """Blocked by the old Managed Ruleset or CRS at ``level`` and ``threshold`` (CRS without the port)."""
        return self.old_managed or self.crs_scores[level] >= threshold

    def after(self, level: int, threshold: int) -> bool:
        """Blocked by the current Managed Ruleset or CRS at ``level`` and ``threshold``."""
        return self.managed or self.crs_scores[level] >= threshold


def read_old_ruleset(path: str) -> list[OldRule]:
    """The rules of ``path`` as it was at ``OLD_COMMIT``, compiled. Raises ``subprocess.CalledProcessError`` when
    git cannot show it (a shallow clone without that commit)."""
    text = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:{path}"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout
    rules: list[OldRule] = []
    for item in tomllib.loads(text)["rules"]:
        levels = [int(category[-1]) for category in item.get("categories", ()) if category.startswith("paranoia-")]
        rules.append(
            OldRule(
                id=item["id"],
                description=item["description"],
                paranoia_level=levels[0] if levels else 1,
                score=SEVERITY_SCORES.get(item.get("severity", ""), 0),
                action=item["action"],
                predicate=compile_expression(item["expression"]).predicate,
            )
        )
    return rules


def attack_requests() -> list[AttackRequest]:
    """Every payload of the project's attack lists in every place, then the corpus's whole-request attacks."""
    payloads: dict[str, None] = {}  # ordered, without repeats
    for payload in (
        *(payload for _, payload in TYPICAL),
        *(payload for _, payload in BLATANT),
        *(payload for _, payload, _ in PARTIAL),
        *(payload for _, payload in PAYLOADS),
        *(payload for _, payload in SIGNATURE_PAYLOADS),
    ):
        payloads[payload] = None
    requests = [AttackRequest(f"{place}: {payload}", placed(payload, place).fields()) for payload in payloads
                for place in PLACES]  # fmt: skip
    requests.extend(AttackRequest(f"corpus: {attack.sample.name}", attack.sample.fields()) for attack in ATTACKS)
    return requests


def managed_firewall() -> Firewall:
    """A zone's default deployment: the Managed Ruleset of the working tree with its default actions."""
    execute = {"action": "execute", "expression": "true", "action_parameters": {"id": MANAGED_RULESET_ID}}
    return compile_firewall({"http_request_firewall_managed": [execute]})


def crs_scorers(levels: Sequence[int]) -> dict[int, Callable[[RequestFields], int]]:
    """For each level, the OWASP Core Ruleset's anomaly score of a request as the firewall computes it (its score
    rule logging from 1, so that its record carries the sum)."""

    def scorer(firewall: Firewall) -> Callable[[RequestFields], int]:
        def score(fields: RequestFields) -> int:
            for match in firewall.evaluate(fields).matches:
                if match.rule_id == OWASP_SCORE_RULE_ID:
                    return int(match.metadata["score"])
            return 0

        return score

    return {
        level: scorer(
            compile_firewall(
                {
                    "http_request_firewall_managed": deploy_managed_rulesets(
                        paranoia_level=level, score_threshold=1, core_action="log", managed=False
                    )
                }
            )
        )
        for level in levels
    }


def judge(requests: Sequence[AttackRequest], levels: Sequence[int]) -> list[Judgement]:
    """Every request through the four engines."""
    old_core = [rule for rule in read_old_ruleset(OLD_CORE_PATH) if rule.score]
    old_managed = [rule for rule in read_old_ruleset(OLD_MANAGED_PATH) if rule.action == "block"]
    managed = managed_firewall()
    crs = crs_scorers(levels)
    judgements: list[Judgement] = []
    for request in requests:
        judgement = Judgement(request)
        judgement.old_matches = [rule for rule in old_core if rule.predicate(request.fields)]
        judgement.old_managed = any(rule.predicate(request.fields) for rule in old_managed)
        judgement.managed = managed.evaluate(request.fields).blocked
        judgement.crs_scores = {level: crs[level](request.fields) for level in levels}
        judgements.append(judgement)
    return judgements


def report(judgements: Sequence[Judgement], levels: Sequence[int], thresholds: Sequence[int]) -> dict[str, Any]:
    """The coverage table and the gaps, as data."""
    rows: list[dict[str, Any]] = []
    for threshold in thresholds:
        for level in levels:
            gaps = [j for j in judgements if j.before(level, threshold) and not j.after(level, threshold)]
            rows.append(
                {
                    "threshold": threshold,
                    "paranoia_level": level,
                    "requests": len(judgements),
                    "old_core": sum(j.old_core_score(level) >= threshold for j in judgements),
                    "old_managed": sum(j.old_managed for j in judgements),
                    "before": sum(j.before(level, threshold) for j in judgements),
                    "unported": sum(j.unported(level, threshold) for j in judgements),
                    "unported_gaps": sum(
                        j.before(level, threshold) and not j.unported(level, threshold) for j in judgements
                    ),
                    "managed": sum(j.managed for j in judgements),
                    "crs": sum(j.crs_scores[level] >= threshold for j in judgements),
                    "after": sum(j.after(level, threshold) for j in judgements),
                    "gaps": [
                        {
                            "request": gap.request.name,
                            "old_score": gap.old_core_score(level),
                            "crs_score": gap.crs_scores[level],
                            "old_rules": [
                                f"{rule.id} PL{rule.paranoia_level} +{rule.score} {rule.description}"
                                for rule in gap.old_matches
                                if rule.paranoia_level <= level
                            ],
                        }
                        for gap in gaps
                    ],
                }
            )
    return {"rows": rows}


def print_report(document: dict[str, Any]) -> None:
    """The table, then each gap with the old rules behind it."""
    print("threshold  PL  requests  old core  old managed  before  crs  old managed+crs (gaps)  managed  after  gaps")
    for row in document["rows"]:
        print(
            f"{row['threshold']:9}  {row['paranoia_level']:2}  {row['requests']:8}  {row['old_core']:8}  "
            f"{row['old_managed']:11}  {row['before']:6}  {row['crs']:3}  "
            f"{row['unported']:15} ({row['unported_gaps']:3})  {row['managed']:7}  {row['after']:5}  "
            f"{len(row['gaps']):4}"
        )
    for row in document["rows"]:
        for gap in row["gaps"]:
            print(
                f"\nT{row['threshold']} PL{row['paranoia_level']} {gap['request']!r} "
                f"(old score {gap['old_score']}, CRS score {gap['crs_score']})"
            )
            for rule in gap["old_rules"]:
                print(f"    {rule}")


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the coverage table and the gaps; exits 1 when there is a gap."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=int, action="append")
    parser.add_argument("--paranoia-level", type=int, action="append", choices=PARANOIA_LEVELS)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout holds the report only
    levels = args.paranoia_level or list(PARANOIA_LEVELS)
    thresholds = args.threshold or list(THRESHOLDS)
    document = report(judge(attack_requests(), levels), levels, thresholds)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print_report(document)
    return 1 if any(row["gaps"] for row in document["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
