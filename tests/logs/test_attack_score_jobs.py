"""Which Logpush jobs log the attack scores: an ``http_requests`` job whose field list is empty (every field) or names
a ``WAF*AttackScore`` field, or a condition of whose filter reads one (the parsed filter: a score named only in a
value does not count); a job that no longer validates logs nothing."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.logs.attack_score_jobs import logs_attack_scores

SCORE_FILTER = '{"where":{"key":"WAFAttackScore","operator":"lt","value":50}}'
RAY_FILTER = '{"where":{"key":"RayID","operator":"eq","value":"8f1e2d3c4b5a6978"}}'
# The score's name as a value, not a key: the filter's text names it, the filter reads no score.
NAMED_FILTER = '{"where":{"key":"ClientRequestPath","operator":"contains","value":"WAFAttackScore"}}'
NESTED_FILTER = (
    '{"where":{"and":[{"key":"RayID","operator":"eq","value":"8f1e2d3c4b5a6978"},'
    '{"or":[{"key":"EdgeResponseStatus","operator":"eq","value":403},'
    '{"key":"WAFRCEAttackScore","operator":"lt","value":20}]}]}}'
)
INVALID_FILTER = '{"where":{"key":"WAFAttackScore","operator":"lt"}}'


@pytest.mark.parametrize(
    ("members", "logs"),
    [
        ({}, True),  # no options: every field
        ({"output_options": {"field_names": []}}, True),
        ({"output_options": {"field_names": ["RayID", "WAFSQLiAttackScore"]}}, True),
        ({"output_options": {"field_names": ["RayID"]}}, False),
        ({"output_options": {"field_names": ["RayID"]}, "filter": SCORE_FILTER}, True),
        ({"output_options": {"field_names": ["RayID"]}, "filter": RAY_FILTER}, False),
        ({"output_options": {"field_names": ["RayID"]}, "filter": NAMED_FILTER}, False),
        ({"output_options": {"field_names": ["RayID"]}, "filter": NESTED_FILTER}, True),
        ({"output_options": {"field_names": ["RayID"]}, "filter": INVALID_FILTER}, False),  # no longer validates
        ({"logpull_options": "fields=RayID,WAFXSSAttackScore&timestamps=rfc3339"}, True),
        ({"logpull_options": "fields=RayID&timestamps=rfc3339"}, False),
        ({"logpull_options": "fields=RayID", "filter": SCORE_FILTER}, True),
        ({"output_options": {"field_names": ["NoSuchField"]}}, False),  # no longer validates
        ({"output_options": {"field_names": ["NoSuchField"]}, "filter": SCORE_FILTER}, False),
        ({"logpull_options": "nonsense=1"}, False),
        ({"dataset": "firewall_events"}, False),
        ({"dataset": "firewall_events", "filter": SCORE_FILTER}, False),
    ],
)
def test_which_jobs_log_the_attack_scores(members: dict[str, Any], logs: bool) -> None:
    job = LogpushJobDefinition(
        **{"id": 1, "dataset": "http_requests", "destination_conf": "file:///tmp/unused", "enabled": True, **members}
    )
    assert logs_attack_scores(job) is logs
