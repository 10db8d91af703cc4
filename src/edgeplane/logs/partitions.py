"""Where each edge worker keeps its log store: one partition per worker, so that every store has one writer."""

from __future__ import annotations

from pathlib import Path


def partition_directory(data_dir: Path, worker: int) -> Path:
    """The log store of edge worker ``worker`` (0 is the process of ``edgeplane serve``)."""
    return data_dir / "logs" / f"edge-{worker}"


def journal_directory(data_dir: Path, worker: int) -> Path:
    """The request log's write-ahead journal of edge worker ``worker`` (``edgeplane.edge.request_journal``): beside
    its log store, not in it (the store takes every directory in its own for a dataset)."""
    return data_dir / "logs" / f"edge-{worker}.journal"
