"""The dataset schemas of REFERENCE.md section 2, as data."""

from __future__ import annotations

import pytest

from edgeplane.logs.datasets import DATASETS, FIELD_TYPES, load_dataset
from edgeplane.logs.errors import LogsError, UnknownDatasetError


@pytest.mark.parametrize("name", DATASETS)
def test_every_dataset_loads_with_typed_unique_fields(name: str) -> None:
    dataset = load_dataset(name)
    assert dataset.name == name
    assert len(set(dataset.field_names)) == len(dataset.fields) > 20
    for field in dataset.fields:
        assert field.type in FIELD_TYPES
        assert field.description
        assert dataset.field(field.name) is field
        if field.type == "object":
            assert not field.filterable


@pytest.mark.parametrize(
    ("dataset", "field", "type_", "filterable"),
    [
        ("http_requests", "BotScore", "int", True),
        ("http_requests", "ClientRequestHost", "string", True),
        ("http_requests", "CacheTieredFill", "bool", True),
        ("http_requests", "EdgeResponseCompressionRatio", "float", True),
        ("http_requests", "EdgeStartTimestamp", "timestamp", True),
        ("http_requests", "BotTags", "array_string", True),
        ("http_requests", "RequestHeaders", "object", False),
        ("firewall_events", "Datetime", "timestamp", True),
        ("firewall_events", "ClientASN", "int", True),
        ("firewall_events", "Metadata", "object", False),
    ],
)
def test_field_types(dataset: str, field: str, type_: str, filterable: bool) -> None:
    found = load_dataset(dataset).field(field)
    assert found is not None
    assert (found.type, found.filterable) == (type_, filterable)


@pytest.mark.parametrize(
    "field", ["Action", "Description", "Kind", "MatchIndex", "Metadata", "OriginatorRayID", "RuleID", "Source"]
)
def test_firewall_events_fields_that_cannot_be_filtered(field: str) -> None:
    found = load_dataset("firewall_events").field(field)
    assert found is not None
    assert not found.filterable


def test_field_lookup_is_case_sensitive() -> None:
    assert load_dataset("http_requests").field("botscore") is None


def test_unknown_dataset_is_a_typed_error() -> None:
    with pytest.raises(UnknownDatasetError, match="dns_logs") as caught:
        load_dataset("dns_logs")
    assert isinstance(caught.value, LogsError)
    assert caught.value.name == "dns_logs"
