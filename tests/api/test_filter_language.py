"""``GET /filter-language``: the filter builder's view of the filter language is the one the API enforces."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from edgeplane.api.filter_language import filter_language, filter_language_routes
from edgeplane.logs.datasets import DATASETS, load_dataset
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_checker import OPERATORS_BY_TYPE
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, MAX_OPERATORS, parse_filter


def test_the_route_answers_the_language_in_a_v4_envelope() -> None:
    with TestClient(Starlette(routes=filter_language_routes())) as client:
        answer = client.get("/filter-language")
    assert answer.status_code == 200
    assert answer.json() == {"success": True, "errors": [], "messages": [], "result": filter_language()}


def test_the_limits_are_the_parsers() -> None:
    assert filter_language()["limits"] == {"max_filter_bytes": MAX_FILTER_BYTES, "max_operators": MAX_OPERATORS}


@pytest.mark.parametrize("name", DATASETS)
def test_each_fields_type_and_filterability_are_the_datasets(name: str) -> None:
    fields = filter_language()["datasets"][name]
    assert list(fields) == [field.name for field in load_dataset(name).fields]
    for field in load_dataset(name).fields:
        assert fields[field.name] == {"type": field.type, "filterable": field.filterable}


# A value of each type as the builder writes it: single values as strings, numbers as numbers in an in/!in array.
SINGLE = {"string": '"a"', "array_string": '"a"', "int": '"30"', "float": '"1.5"', "timestamp": '"1"', "bool": '"true"'}
IN_ARRAY = {
    "string": '["a"]',
    "array_string": '["a"]',
    "int": "[30]",
    "float": "[1.5]",
    "timestamp": "[1]",
    "bool": "[true]",
}


@pytest.mark.parametrize("kind", sorted(OPERATORS_BY_TYPE))
def test_every_operator_offered_for_a_type_is_accepted_and_no_other(kind: str) -> None:
    language = filter_language()
    if kind == "object":  # never filterable: nothing to offer
        assert language["operators_by_type"][kind] == []
        return
    dataset = load_dataset("http_requests")
    field = next((f for f in dataset.fields if f.type == kind and f.filterable), None)
    assert field is not None
    offered = language["operators_by_type"][kind]
    for operator in language["operators"]:
        value = IN_ARRAY[kind] if operator in language["set_operators"] else SINGLE[kind]
        text = f'{{"where":{{"key":"{field.name}","operator":"{operator}","value":{value}}}}}'
        if operator in offered:
            parse_filter(text, dataset)
        else:
            with pytest.raises(FilterError):
                parse_filter(text, dataset)
