"""Which Logpush jobs log the requests' attack scores. The edge computes a request's attack scores only when a rule
reads them or a job of its zone logs them (scoring is work the firewall otherwise skips); the edge worker's snapshot
(``edgeplane.configuration.snapshot``) finds those zones with this test of each enabled job."""

from __future__ import annotations

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.errors import LogsError
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.output_options import parse_logpull_options, parse_output_options
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.waf.events import ATTACK_SCORE_FIELDS


def logs_attack_scores(job: LogpushJobDefinition) -> bool:
    """Whether ``job`` (enabled or not) writes the attack scores of ``http_requests`` records: its field list names a
    ``WAF*AttackScore`` field or is empty (every field), or a condition of its filter reads one. A job that no longer
    validates (its options or its filter) logs nothing."""
    if job.dataset != HTTP_REQUESTS:
        return False
    dataset = load_dataset(HTTP_REQUESTS)
    try:
        if job.output_options is not None:
            fields = parse_output_options(job.output_options, dataset).field_names
        elif job.logpull_options:
            fields = parse_logpull_options(job.logpull_options, dataset).fields
        else:
            fields = ()
        tree = parse_filter(job.filter, dataset) if job.filter else None
    except LogsError:
        return False
    if not fields or not set(fields).isdisjoint(ATTACK_SCORE_FIELDS):
        return True
    return tree is not None and any(condition.key in ATTACK_SCORE_FIELDS for condition in tree.conditions())
