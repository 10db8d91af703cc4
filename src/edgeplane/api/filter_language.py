"""``GET /filter-language``: what the Logpush filter builder of the dashboard needs to know of the filter language,
read from the code that enforces it: each dataset's fields with their type and whether a filter may name them, the
operators each type takes, and the limits on a filter's size and operators.

The v4 answer for a dataset's fields (``GET .../logpush/datasets/{dataset}/fields``) is field name → description, as
on the real API; it has no room for a type. This answer adds the types beside it, outside ``/client/v4``, so that
the builder offers the operators and value inputs the API will accept without keeping a copy of the table. It holds
no tenant data (the same for every caller), and judges nothing: the API still validates every filter it is sent.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from edgeplane.api.endpoint import envelope_response
from edgeplane.logs.datasets import DATASETS, load_dataset
from edgeplane.logs.filter_checker import OPERATORS_BY_TYPE
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, MAX_OPERATORS
from edgeplane.logs.filter_tree import OPERATORS, SET_OPERATORS


@cache
def filter_language() -> dict[str, Any]:
    """The filter language as the builder shows it: ``limits``, ``operators`` (in the language's order, with the
    ones taking an array), ``operators_by_type`` and ``datasets`` (name → field → ``{type, filterable}``)."""
    return {
        "limits": {"max_filter_bytes": MAX_FILTER_BYTES, "max_operators": MAX_OPERATORS},
        "operators": list(OPERATORS),
        "set_operators": [operator for operator in OPERATORS if operator in SET_OPERATORS],
        "operators_by_type": {
            kind: [operator for operator in OPERATORS if operator in allowed]
            for kind, allowed in OPERATORS_BY_TYPE.items()
        },
        "datasets": {
            name: {
                field.name: {"type": field.type, "filterable": field.filterable} for field in load_dataset(name).fields
            }
            for name in DATASETS
        },
    }


async def filter_language_answer(request: Request) -> Response:
    """The v4 envelope holding ``filter_language()``."""
    return envelope_response(200, success=True, errors=[], result=filter_language())


def filter_language_routes() -> list[BaseRoute]:
    """``GET /filter-language``."""
    return [Route("/filter-language", filter_language_answer, methods=["GET"])]
