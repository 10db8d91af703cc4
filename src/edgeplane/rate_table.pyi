"""Types of the C module ``rate_table.c`` (see its opening comment)."""

from _typeshed import WriteableBuffer

HEADER_SIZE: int
SLOT_SIZE: int
SLOTS_PER_BUCKET: int
TAKEOVER_MS: int

def layout_size(slots: int, /) -> int: ...
def siphash24(key: bytes, data: bytes, /) -> int: ...

class RateTable:
    def __init__(self, buffer: WriteableBuffer, slots: int) -> None: ...
    @property
    def slots(self) -> int: ...
    @property
    def initialised(self) -> bool: ...
    def initialise(self, key: bytes, /) -> None: ...
    def acquire(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
        /,
    ) -> int: ...
    def check(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
        /,
    ) -> int: ...
    def add(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
        /,
    ) -> None: ...
    def key_hash(self, rule: int, values: tuple[str | bytes, ...], /) -> int: ...
    def occupied(self, now_ms: int, /) -> int: ...
    def take_counts(self) -> tuple[int, int]: ...
    def close(self) -> None: ...
