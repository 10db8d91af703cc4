"""Types of the C module ``row_builder.c`` (see its opening comment)."""

from typing import Any

from edgeplane.edge.http_server import Answer

def setup(
    request_type: type,
    response_type: type,
    exchange_type: type,
    zone_type: type,
    allowed: object,
    noted_count: int,
    user_agent: int,
    referer: int,
    requested_with: int,
    /,
) -> None: ...
def add_answers(
    answers: list[Answer],
    shapes: dict[tuple[Any, ...], int],
    shape_list: list[tuple[Any, ...]],
    shape_numbers: bytearray,
    rays: bytearray,
    numbers: bytearray,
    last: list[Any],
    /,
) -> list[Answer]: ...
