"""One log stream read by several delivery services in a test, as the log bus is read by several delivery
processes: a real log store on disk, read-only, whose job cursors are kept in a shared cursor store (the
database's ``DatabaseCursors``) instead of files beside the segments."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from edgeplane.logs.log_store import SegmentedLogStore


class SharedCursors(Protocol):
    """Where the cursors are kept (``edgeplane.logs.database_cursors.DatabaseCursors``)."""

    def load(self, dataset: str, job_id: int) -> int | None: ...

    def save(self, dataset: str, job_id: int, position: int) -> None: ...

    def delete(self, dataset: str, job_id: int) -> None: ...


class SharedCursorStore(SegmentedLogStore):
    """The store in ``directory`` read with the cursors of ``cursors``; a save the cursors refuse raises their
    error (``LeaseLostError``)."""

    def __init__(self, directory: Path, cursors: SharedCursors) -> None:
        super().__init__(directory, writable=False)
        self.cursors = cursors

    def load_cursor(self, dataset: str, job_id: int) -> int | None:
        return self.cursors.load(dataset, job_id)

    def open_cursor(self, dataset: str, job_id: int) -> int:
        position = self.cursors.load(dataset, job_id)
        if position is None:
            position = self.end_position(dataset)
            self.cursors.save(dataset, job_id, position)
        return position

    def save_cursor(self, dataset: str, job_id: int, position: int) -> None:
        self.cursors.save(dataset, job_id, position)

    def delete_cursor(self, dataset: str, job_id: int) -> None:
        self.cursors.delete(dataset, job_id)
