"""The node's rate limiting counters: one ``RateTable`` in a memfd, created by the node and attached by its workers.

Why shared memory, and why the table is C (``rate_table.c``): a rate limiting rule's counter is the node's, so a
node with four edge workers lets through ``requests_per_period``, not four times it. Every worker counts in the
same mapping, and each request's check-and-count must be atomic across processes at a cost of about a microsecond:
no Python library offers atomic compare-and-swap on a shared mapping, and a lock between processes costs a system
call when contended. The C module holds the layout, the bucket locks, the keys' SipHash and the sliding window
estimate; this module owns what it counts in: the memfd (created once per node, passed to each worker as an
inheritable descriptor), its mapping, and the table over it.

Memory is fixed when the node starts (``layout_size(slots)``, about 16 MiB for ``DEFAULT_SLOTS``): a flood of
distinct keys evicts the lightest counters (relative to their limits) instead of growing, and the table counts
those evictions (``RateTable.take_counts``).
"""

from __future__ import annotations

import fcntl
import mmap
import os
from typing import Final

from edgeplane.rate_table import HEADER_SIZE, SLOT_SIZE, RateTable, layout_size

DEFAULT_SLOTS: Final = 262144
KEY_BYTES: Final = 16


class RateCounters:
    """A rate table in a memfd's mapping; ``close`` releases the table, the mapping and the descriptor."""

    def __init__(self, fd: int, mapping: mmap.mmap, table: RateTable) -> None:
        self._fd = fd
        self._mapping = mapping
        self._table = table

    @classmethod
    def create(cls, slots: int = DEFAULT_SLOTS) -> RateCounters:
        """A new, empty table of ``slots`` slots (a positive multiple of 8) under a random SipHash key, in a new
        inheritable memfd sealed at its size. Raises ``ValueError`` for a bad slot count, ``OSError`` when the memory
        is refused."""
        size = layout_size(slots)
        fd = os.memfd_create("edgeplane-rate-counters", os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            # Sealed at its size: a process that truncated it would kill every mapping's reader with SIGBUS.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            os.set_inheritable(fd, True)
            mapping = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        table = RateTable(mapping, slots)
        table.initialise(os.urandom(KEY_BYTES))
        return cls(fd, mapping, table)

    @classmethod
    def attach(cls, fd: int) -> RateCounters:
        """The table another process created in the memfd ``fd``, given to this one, which owns ``fd`` from now on
        (``close`` closes it). Raises ``ValueError`` (and leaves ``fd`` open) when ``fd`` holds no rate table of this
        version."""
        size = os.fstat(fd).st_size
        slots = (size - HEADER_SIZE) // SLOT_SIZE
        mapping = mmap.mmap(fd, size)
        try:
            table = RateTable(mapping, slots)
        except BaseException:
            mapping.close()
            raise
        if not table.initialised:
            table.close()
            mapping.close()
            raise ValueError("the memfd holds no initialised rate table")
        return cls(fd, mapping, table)

    @property
    def fd(self) -> int:
        """The memfd, to hand to a worker process (inheritable)."""
        return self._fd

    @property
    def table(self) -> RateTable:
        """The table to count in."""
        return self._table

    def close(self) -> None:
        """Releases the table and the mapping and closes the descriptor; the memory goes when the last process
        holding it closes it."""
        self._table.close()
        self._mapping.close()
        os.close(self._fd)
