"""The development chain's storage: py-evm's key-value database on SQLite, plus edgeplane's own tables.

py-evm stores its tries, headers, blocks and receipts in a key-value database it reaches through ``DatabaseAPI``.
SQLite (in the standard library) backs it here, in one file per chain, so that the chain survives restarts without a
native key-value engine to build. Writes are grouped: ``commit()`` ends a transaction (after each mined block), so
a crash loses at most the block being mined, never half of one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from eth.db.backends.base import BaseDB


class SqliteKeyValue(BaseDB):
    """A ``DatabaseAPI`` over one SQLite table; the open transaction is committed by ``commit()``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        self.connection.execute("BEGIN")

    def __getitem__(self, key: bytes) -> bytes:
        row = self.connection.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        value: bytes = row[0]
        return value

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.connection.execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (key, value))

    def __delitem__(self, key: bytes) -> None:
        cursor = self.connection.execute("DELETE FROM kv WHERE k = ?", (key,))
        if cursor.rowcount == 0:
            raise KeyError(key)

    def _exists(self, key: bytes) -> bool:
        return self.connection.execute("SELECT 1 FROM kv WHERE k = ?", (key,)).fetchone() is not None

    def commit(self) -> None:
        """Makes everything written so far durable and starts the next transaction."""
        self.connection.execute("COMMIT")
        self.connection.execute("BEGIN")

    def close(self) -> None:
        """Commits and closes the file."""
        self.connection.execute("COMMIT")
        self.connection.close()
