"""The log records of a firewall verdict: one ``firewall_events`` record per match, and the ``Security*`` fields of
the request's ``http_requests`` record.

A challenge cannot be served by this edge, so a rule whose action is a challenge is answered as a block and recorded
as ``block``; the configured action is kept in the event's ``Metadata`` (``action``). ``MatchIndex`` counts back
from the last match: the last (the terminating one, if any) has 0, the one before it 1, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
            "Metadata": _metadata(match),
            "Ref": match.ref,
            "RuleID": match.rule_id,
            "Source": match.source,
        }
        for position, match in enumerate(verdict.matches)
    ]


def _metadata(match: Match) -> dict[str, str]:
    metadata = {"ruleset_id": match.ruleset_id, "phase": match.phase, **match.metadata}
    if match.action in TERMINATING_ACTIONS and match.action != "block":
        metadata["action"] = match.action
    return metadata
