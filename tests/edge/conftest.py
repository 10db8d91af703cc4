"""The journal's two ways of writing, for the tests that journal: on the caller's thread (writes are quick) and on
the journal's own thread (after one write slower than ``SLOW_WRITE_SECONDS``, which a GC pause or a busy disk can
cause at any moment). A test that uses ``journal_writes`` runs once each way, so that what it checks after a
``flush`` or ``close`` holds whichever way the journal happens to write."""

from __future__ import annotations

import pytest

from edgeplane.edge import request_journal


@pytest.fixture(params=["quick writes", "slow disk"])
def journal_writes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``"slow disk"``: every write counts as slow, so the first one moves the journal to its thread."""
    if request.param == "slow disk":
        monkeypatch.setattr(request_journal, "SLOW_WRITE_SECONDS", -1.0)
    return str(request.param)
