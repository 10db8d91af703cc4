"""The log records of a firewall verdict: one ``firewall_events`` record per match, and the ``Security*`` fields of
the request's ``http_requests`` record.

A challenge cannot be served by this edge, so a rule whose action is a challenge is answered as a block and recorded
as ``block``; the configured action is kept in the event's ``Metadata`` (``action``). ``MatchIndex`` counts back
from the last match: the last (the terminating one, if any) has 0, the one before it 1, and so on.

The attack scores go to ``http_requests`` as ``WAFAttackScore``, ``WAFSQLiAttackScore``, ``WAFXSSAttackScore`` and
``WAFRCEAttackScore`` (100 when the request was not scored), and, when they were computed, into each event's
``Metadata`` as ``waf_score``, ``waf_score_sqli``, ``waf_score_xss`` and ``waf_score_rce`` (the ``firewall_events``
dataset has no field of its own for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from edgeplane.waf.attack_scores import NOT_COMPUTED, AttackScores
from edgeplane.waf.firewall import TERMINATING_ACTIONS, Match, Verdict

FIREWALL_EVENTS: Final = "firewall_events"
KIND: Final = "firewall"


def recorded_action(action: str) -> str:
    """The action as the logs name what was done: every terminating action is a ``block`` here."""
    return "block" if action in TERMINATING_ACTIONS else action


def security_fields(verdict: Verdict) -> dict[str, Any]:
    """The ``Security*`` fields of the ``http_requests`` record of a request with this verdict (none when nothing
    matched). ``SecurityAction``, ``SecurityRuleID`` and ``SecurityRuleDescription`` name the terminating rule, or
    the last match when none terminated."""
    if not verdict.matches:
        return {}
    last = verdict.terminal or verdict.matches[-1]
    return {
        "SecurityAction": recorded_action(last.action),
        "SecurityActions": [recorded_action(match.action) for match in verdict.matches],
        "SecurityRuleID": last.rule_id,
        "SecurityRuleIDs": [match.rule_id for match in verdict.matches],
        "SecurityRuleDescription": last.description,
        "SecuritySources": list(dict.fromkeys(match.source for match in verdict.matches)),
    }


# The ``http_requests`` fields of the attack scores, in the order of ``AttackScores.as_tuple``.
ATTACK_SCORE_FIELDS: Final = ("WAFAttackScore", "WAFSQLiAttackScore", "WAFXSSAttackScore", "WAFRCEAttackScore")
_METADATA_SCORES: Final = ("waf_score", "waf_score_sqli", "waf_score_xss", "waf_score_rce")


def attack_score_fields(scores: AttackScores | None) -> dict[str, int]:
    """The ``WAF*AttackScore`` fields of the ``http_requests`` record of a request scored ``scores`` (None: not
    scored, every field 100)."""
    return dict(zip(ATTACK_SCORE_FIELDS, (scores or NOT_COMPUTED).as_tuple(), strict=True))


def firewall_event_records(
    verdict: Verdict, request: Mapping[str, Any], *, datetime_ns: int, edge_status: int
) -> list[dict[str, Any]]:
    """One ``firewall_events`` record per match of ``verdict``. ``request`` holds the request's own fields of the
    dataset (``ClientIP``, ``ClientRequestHost``, ``RayID``, ...), copied into every record."""
    count = len(verdict.matches)
    return [
        {
            **request,
            "Action": recorded_action(match.action),
            "Datetime": datetime_ns,
            "Description": match.description,
            "EdgeResponseStatus": edge_status,
            "Kind": KIND,
            "MatchIndex": count - 1 - position,
            "Metadata": _metadata(match, verdict.scores),
            "Ref": match.ref,
            "RuleID": match.rule_id,
            "Source": match.source,
        }
        for position, match in enumerate(verdict.matches)
    ]


def _metadata(match: Match, scores: AttackScores | None) -> dict[str, str]:
    metadata = {"ruleset_id": match.ruleset_id, "phase": match.phase, **match.metadata}
    if scores is not None:
        metadata.update(zip(_METADATA_SCORES, map(str, scores.as_tuple()), strict=True))
    if match.action in TERMINATING_ACTIONS and match.action != "block":
        metadata["action"] = match.action
    return metadata
