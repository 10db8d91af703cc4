"""The rate table of ``src/edgeplane/rate_table.c`` in plain Python, as the oracle of its tests: the same keys
(SipHash-2-4 over the length-prefixed encoding), the same buckets, sliding window estimate, blocks, eviction ranking
and inheritance, in unbounded integers with the C module's saturations written out. One process, no locks."""

from __future__ import annotations

import struct
from dataclasses import dataclass

SLOTS_PER_BUCKET = 8
U32 = (1 << 32) - 1
U64 = (1 << 64) - 1
I64 = (1 << 63) - 1
MASK = U64
TAG_TEXT = 1
TAG_BYTES = 2

# Where the C layout puts a bucket's lock: the first slot's last four bytes.
HEADER_SIZE = 64
SLOT_SIZE = 64
LOCK_OFFSET = 60


def bucket_lock_offset(bucket: int) -> int:
    """The offset of bucket ``bucket``'s lock word (u32) in the table's buffer."""
    return HEADER_SIZE + bucket * SLOTS_PER_BUCKET * SLOT_SIZE + LOCK_OFFSET


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash24(key: bytes, data: bytes) -> int:
    """SipHash-2-4 of ``data`` under the 16-byte ``key``."""
    k0, k1 = (int(word) for word in struct.unpack("<QQ", key))
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(count: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(count):
            v0 = (v0 + v1) & MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    whole = len(data) - len(data) % 8
    for offset in range(0, whole, 8):
        (m,) = struct.unpack_from("<Q", data, offset)
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = int.from_bytes(data[whole:], "little") | (len(data) & 0xFF) << 56
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return int(v0 ^ v1 ^ v2 ^ v3)


def key_bytes(rule: int, values: tuple[str | bytes, ...]) -> bytes:
    """What the table hashes for a key: the rule id, then each value tagged and length-prefixed."""
    parts = [struct.pack("<I", rule)]
    for value in values:
        data, tag = (value.encode(), TAG_TEXT) if isinstance(value, str) else (value, TAG_BYTES)
        parts.append(struct.pack("<BQ", tag, len(data)) + data)
    return b"".join(parts)


@dataclass
class Slot:
    hash: int = 0
    rule: int = 0
    period: int = 0
    window_start: int = 0
    current: int = 0
    previous: int = 0
    blocked_until: int = 0
    last_touch: int = 0
    limit: int = 0

    def counts_at(self, now: int) -> tuple[int, int, int]:
        """(previous, current, elapsed ms) as seen at ``now``."""
        start = now - now % self.period
        if start <= self.window_start:
            return self.previous, self.current, max(now - self.window_start, 0)
        if start - self.period == self.window_start:
            return self.current, 0, now - start
        return 0, 0, now - start

    def roll(self, now: int) -> None:
        self.previous, self.current, _ = self.counts_at(now)
        self.window_start = max(self.window_start, now - now % self.period)

    def free(self, now: int) -> bool:
        return self.period == 0 or (now - self.last_touch >= 2 * self.period and self.blocked_until <= now)

    def rank(self, now: int) -> int:
        if self.blocked_until > now:
            return U64
        previous, current, elapsed = self.counts_at(now)
        weighted = previous * (self.period - elapsed) + current * self.period
        return min((weighted << 16) // (self.period * max(self.limit, 1)), U64)

    def over(self, now: int, limit: int, amount: int) -> bool:
        elapsed = max(now - self.window_start, 0)
        return self.previous * (self.period - elapsed) + (self.current + amount) * self.period > limit * self.period

    def throttle_wait(self, now: int, limit: int, amount: int) -> int:
        period, start = self.period, self.window_start
        if self.current + amount <= limit:
            fits = period if self.previous == 0 else (limit - self.current - amount) * period // self.previous
            at = start + period - min(fits, period)
        elif amount <= limit:
            fits = period if self.current == 0 else (limit - amount) * period // self.current
            at = start + period + period - min(fits, period)
        else:
            return period
        return max(at - now, 1)

    def touch(self, now: int, limit: int) -> None:
        self.last_touch = max(self.last_touch, now)
        self.limit = min(limit, U32)


class RateTableModel:
    """The oracle: what ``edgeplane.rate_table.RateTable`` answers, given the same key and calls."""

    def __init__(self, slots: int, key: bytes) -> None:
        self.key = key
        self.buckets = slots // SLOTS_PER_BUCKET
        self.table = [Slot() for _ in range(slots)]
        self.evictions = 0
        self.saturations = 0

    def key_hash(self, rule: int, values: tuple[str | bytes, ...]) -> int:
        return siphash24(self.key, key_bytes(rule, values))

    def _claim(self, rule: int, values: tuple[str | bytes, ...], period: int, now: int) -> Slot:
        hash_ = self.key_hash(rule, values)
        first = (hash_ % self.buckets) * SLOTS_PER_BUCKET
        bucket = self.table[first : first + SLOTS_PER_BUCKET]
        free = None
        for slot in bucket:
            if slot.period != 0 and slot.hash == hash_ and slot.rule == rule:
                if slot.period != period or slot.free(now):
                    slot.period = period
                    slot.window_start = now - now % period
                    slot.current = slot.previous = 0
                    slot.blocked_until = 0
                return slot
            if free is None and slot.free(now):
                free = slot
        inherit = False
        if free is None:
            ranks = [slot.rank(now) for slot in bucket]
            free = bucket[ranks.index(min(ranks))]
            inherit = free.rule == rule and free.period == period
            self.evictions += 1
        free.hash = hash_
        free.rule = rule
        free.blocked_until = 0
        if not inherit:
            free.period = period
            free.window_start = now - now % period
            free.current = free.previous = 0
        return free

    def _count(self, slot: Slot, amount: int) -> None:
        if slot.current + amount > U64:
            slot.current = U64
            self.saturations += 1
        else:
            slot.current += amount

    def _decide(
        self,
        counts: bool,
        rule: int,
        values: tuple[str | bytes, ...],
        period: int,
        limit: int,
        amount: int,
        timeout: int,
        now: int,
    ) -> int:
        slot = self._claim(rule, values, period, now)
        slot.roll(now)
        wait = 0
        if slot.blocked_until > now:
            wait = slot.blocked_until - now
        elif not slot.over(now, limit, amount):
            if counts:
                self._count(slot, amount)
        elif timeout > 0:
            slot.blocked_until = min(now + timeout, I64)
            wait = slot.blocked_until - now
        else:
            wait = slot.throttle_wait(now, limit, amount)
        slot.touch(now, limit)
        return wait

    def acquire(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
    ) -> int:
        return self._decide(True, rule, values, period_ms, limit, amount, timeout_ms, now_ms)

    def check(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
    ) -> int:
        return self._decide(False, rule, values, period_ms, limit, amount, timeout_ms, now_ms)

    def add(
        self,
        rule: int,
        values: tuple[str | bytes, ...],
        period_ms: int,
        limit: int,
        amount: int,
        timeout_ms: int,
        now_ms: int,
    ) -> None:
        slot = self._claim(rule, values, period_ms, now_ms)
        slot.roll(now_ms)
        self._count(slot, amount)
        if timeout_ms > 0 and slot.blocked_until <= now_ms and slot.over(now_ms, limit, 0):
            slot.blocked_until = min(now_ms + timeout_ms, I64)
        slot.touch(now_ms, limit)

    def occupied(self, now_ms: int) -> int:
        return sum(not slot.free(now_ms) for slot in self.table)

    def take_counts(self) -> tuple[int, int]:
        counts = (self.evictions, self.saturations)
        self.evictions = self.saturations = 0
        return counts
