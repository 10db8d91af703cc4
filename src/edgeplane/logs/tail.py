"""``edgeplane logs tail``: the records of a dataset as they arrive, from every edge worker's log store, optionally
narrowed by a Logpush filter. It only reads: it saves no cursor and holds nothing back from retention."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.filter_columns import compile_column_filter
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.log_store import PositionLostError, SegmentedLogStore
from edgeplane.logs.partitions import partitions_under
from edgeplane.logs.record_columns import rows_of

_POLL_SECONDS = 0.2


def tail_records(
    data_dir: Path,
    dataset_name: str,
    *,
    filter_text: str | None = None,
    from_start: bool = False,
    follow: bool = True,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[dict[str, Any]]:
    """Yields matching records: those already stored (with ``from_start``), then new ones as they are flushed.
    A missing value is left out of its record, as in a JSON line. Raises ``FilterError`` for an invalid filter and
    ``UnknownDatasetError`` for an unknown dataset."""
    dataset = load_dataset(dataset_name)
    predicate = compile_column_filter(parse_filter(filter_text, dataset), dataset) if filter_text else None
    stores: dict[Path, SegmentedLogStore] = {}
    positions: dict[Path, int] = {}
    while not stop():
        for path in partitions_under(data_dir):
            if path not in stores:
                stores[path] = SegmentedLogStore(path, writable=False)
                store = stores[path]
                positions[path] = (
                    store.oldest_position(dataset.name) if from_start else store.end_position(dataset.name)
                )
        progressed = False
        for path, store in stores.items():
            try:
                batch = store.read_columns(dataset.name, positions[path])
            except PositionLostError as lost:
                positions[path] = lost.oldest_position
                continue
            positions[path] = batch.next_position
            for part in batch.parts:
                progressed = True
                kept = part if predicate is None else part.filter(predicate(part))
                for row in rows_of(kept):
                    yield {name: value for name, value in row.items() if value is not None}
        if not progressed:
            if not follow:
                return
            time.sleep(_POLL_SECONDS)
