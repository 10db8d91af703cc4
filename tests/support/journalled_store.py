"""The request log's way to the store in one process, for router and request-log tests: a request log journalling
into a temporary directory, and a memory store the sealed journal is taken into (as the delivery process does)
whenever the records are looked at."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.request_journal import RequestJournal
from tests.support.memory_log_store import MemoryLogStore


class JournalledStore:
    """A journal in ``directory`` (a temporary one by default) and the memory store its sealed periods go to."""

    def __init__(self, directory: Path | None = None, store: MemoryLogStore | None = None) -> None:
        if directory is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="edgeplane-journal-")  # removed with this object
            directory = Path(self._temporary.name)
        self.directory = directory
        self.journal = RequestJournal(directory)
        self.memory = store if store is not None else MemoryLogStore()
        self.intake = JournalIntake({directory: self.memory})  # type: ignore[dict-item]

    def log(self, **options: Any) -> RequestLog:
        """A request log writing this journal (``RequestLog``'s options)."""
        return RequestLog(self.journal, **options)

    @property
    def records(self) -> dict[str, list[dict[str, Any]]]:
        """What the store holds by dataset, once the sealed periods are taken."""
        self.intake.ingest()
        return self.memory.records

    @property
    def batches(self) -> dict[str, int]:
        """The record batches appended by dataset, once the sealed periods are taken."""
        self.intake.ingest()
        return self.memory.batches
