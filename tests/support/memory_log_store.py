"""A log store in memory for router and request-log tests: it keeps what the edge appends, as dictionaries."""

from __future__ import annotations

from typing import Any


class MemoryLogStore:
    """Keeps every appended record by dataset in ``records``; it never refuses."""

    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = {}

    def append_rows(self, dataset: str, rows: list[dict[str, Any]]) -> None:
        self.records.setdefault(dataset, []).extend(rows)
