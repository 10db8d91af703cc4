"""What a Logpush job delivers, decided one record at a time: the oracle delivery's column path is held to.

Delivery selects and writes records in columns (the zone check and the column filter as Arrow masks, the column
encoder). This module gives the same decision per record, as a dictionary: the job's zones, the per-record
predicate (``tests.support.filter_compiler``) and the sampling, then the per-record encoder
(``tests.support.record_encoder``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.logs.delivery import JobPlan
from edgeplane.logs.filter_parser import parse_filter
from tests.support.filter_compiler import compile_filter
from tests.support.record_encoder import record_encoder


def record_keep(definition: LogpushJobDefinition, plan: JobPlan) -> Callable[[dict[str, Any]], bool]:
    """Whether the job ``definition`` (compiled as ``plan``) delivers a record: its zone, filter and sampling."""
    dataset = plan.dataset
    predicate = compile_filter(parse_filter(definition.filter, dataset), dataset) if definition.filter else None
    zone_names, sample = plan.zone_names, plan.formatter.keep

    def keep(record: dict[str, Any]) -> bool:
        if zone_names is not None and record.get("ZoneName") not in zone_names:
            return False
        if predicate is not None and not predicate(record):
            return False
        return sample(record)

    return keep


def delivered_lines(definition: LogpushJobDefinition, plan: JobPlan, records: Iterable[dict[str, Any]]) -> list[bytes]:
    """The encoded records the job delivers of ``records`` (dictionaries, as JSON would give them), in order."""
    keep, encode = record_keep(definition, plan), record_encoder(plan.formatter).encode
    return [encode(record) for record in records if keep(record)]
