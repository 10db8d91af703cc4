"""``edgeplane logs tail``: the records of a dataset as they arrive, from every edge worker's log store, optionally
narrowed by a Logpush filter. It only reads: it saves no cursor and holds nothing back from retention."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.filter_compiler import compile_filter
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.log_store import PositionLostError, SegmentedLogStore
from edgeplane.logs.partitions import partitions_under

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
    Raises ``FilterError`` for an invalid filter and ``UnknownDatasetError`` for an unknown dataset."""
    dataset = load_dataset(dataset_name)
    predicate = compile_filter(parse_filter(filter_text, dataset), dataset) if filter_text else None
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
                batch = store.read(dataset.name, positions[path])
            except PositionLostError as lost:
                positions[path] = lost.oldest_position
                continue
            positions[path] = batch.next_position
            for raw in batch.records:
                progressed = True
                record = orjson.loads(raw)
                if predicate is None or predicate(record):
                    yield record
        if not progressed:
            if not follow:
                return
            time.sleep(_POLL_SECONDS)
