"""Which Logpush jobs log the attack scores: an ``http_requests`` job whose field list is empty (every field) or names
a ``WAF*AttackScore`` field, or whose filter names one; a job that no longer validates logs nothing."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.logs.attack_score_jobs import logs_attack_scores

SCORE_FILTER = '{"where":{"key":"WAFAttackScore","operator":"lt","value":50}}'
RAY_FILTER = '{"where":{"key":"RayID","operator":"eq","value":"8f1e2d3c4b5a6978"}}'


@pytest.mark.parametrize(
    ("members", "logs"),
    [
        ({}, True),  # no options: every field
        ({"output_options": {"field_names": []}}, True),
        ({"output_options": {"field_names": ["RayID", "WAFSQLiAttackScore"]}}, True),
        ({"output_options": {"field_names": ["RayID"]}}, False),
        ({"output_options": {"field_names": ["RayID"]}, "filter": SCORE_FILTER}, True),
        ({"output_options": {"field_names": ["RayID"]}, "filter": RAY_FILTER}, False),
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
