"""Types of the C module ``row_writer.c`` (see its opening comment)."""

import mmap
from collections.abc import Callable
from typing import Any

ROW_FRAME_SIZE: int

class RowWriter:
    end: int
    @property
    def attached(self) -> bool: ...
    def __init__(
        self,
        *,
        exchange_type: type,
        allowed: object,
        slow: Callable[..., None],
        noted_count: int,
        user_agent: int,
        referer: int,
        requested_with: int,
    ) -> None: ...
    def commit(self, request: Any, response: Any, sent_bytes: int, written_ns: int = 0, /) -> None: ...
    def attach(self, mapping: mmap.mmap, shapes: dict[tuple[Any, ...], int], end: int, limit: int, /) -> None: ...
    def detach(self) -> None: ...
