"""Where each edge worker keeps its log store: one partition per worker, so that every store has one writer."""

from __future__ import annotations

from pathlib import Path

_PREFIX = "edge-"


def partition_directory(data_dir: Path, worker: int) -> Path:
    """The log store of edge worker ``worker`` (0 is the process of ``edgeplane serve``)."""
    return data_dir / "logs" / f"{_PREFIX}{worker}"


def partitions_under(data_dir: Path) -> list[Path]:
    """The log store partitions that exist in a data directory (not the request journals beside them)."""
    return [path for _worker, path in _numbered(data_dir, "")]


def journal_directory(data_dir: Path, worker: int) -> Path:
    """The request log's write-ahead journal of edge worker ``worker`` (``edgeplane.logs.request_journal``): beside
    its log store, not in it (the store takes every directory in its own for a dataset)."""
    return data_dir / "logs" / f"{_PREFIX}{worker}.journal"


def journal_workers(data_dir: Path) -> list[int]:
    """The edge workers that have a request journal directory in a data directory."""
    return [worker for worker, _path in _numbered(data_dir, ".journal")]


def _numbered(data_dir: Path, suffix: str) -> list[tuple[int, Path]]:
    """The directories ``edge-<worker><suffix>`` under ``<data dir>/logs``, by worker."""
    root = data_dir / "logs"
    if not root.is_dir():
        return []
    found = []
    for path in root.glob(f"{_PREFIX}*{suffix}"):
        number = path.name.removeprefix(_PREFIX).removesuffix(suffix)
        if number.isdigit() and path.is_dir():
            found.append((int(number), path))
    return sorted(found)
