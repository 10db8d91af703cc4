"""Where each edge worker keeps its log store: one partition per worker, so that every store has one writer."""

from __future__ import annotations

from pathlib import Path


def partition_directory(data_dir: Path, worker: int) -> Path:
    """The log store of edge worker ``worker`` (0 is the process of ``edgeplane serve``)."""
    return data_dir / "logs" / f"edge-{worker}"
