"""A log store in memory for router and request-log tests: it keeps what the edge appends, as dictionaries."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from edgeplane.logs.record_columns import conform, rows_of


class MemoryLogStore:
    """Keeps every appended record by dataset in ``records`` (a missing value left out, as in a JSON line); it never
    refuses. ``batches`` counts the record batches appended, and the commits, by dataset."""

    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = {}
        self.batches: dict[str, int] = {}

    def append_rows(self, dataset: str, rows: list[dict[str, Any]]) -> None:
        self.records.setdefault(dataset, []).extend(rows)

    def append_columns(self, dataset: str, batch: pa.RecordBatch) -> None:
        rows = rows_of(conform(dataset, batch))
        self.records.setdefault(dataset, []).extend(
            {name: value for name, value in row.items() if value is not None} for row in rows
        )
        self.batches[dataset] = self.batches.get(dataset, 0) + 1

    def commit_columns(self, dataset: str, batches: list[pa.RecordBatch]) -> None:
        """Kept at once, as ``append_columns`` keeps a batch; a commit counts as one batch."""
        for batch in batches:
            self.records.setdefault(dataset, []).extend(
                {name: value for name, value in row.items() if value is not None}
                for row in rows_of(conform(dataset, batch))
            )
        self.batches[dataset] = self.batches.get(dataset, 0) + 1

    def flush(self, timeout: float | None = None) -> bool:
        """Everything appended is kept at once."""
        return True
