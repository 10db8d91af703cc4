"""When to hedge a read: the delay after which a read still unanswered is sent to another node as well.

A slow node makes its reads slow even when the pool scores it low: its first reads, its probes, a node that just
turned slow. Hedging bounds the wait: once a read has waited longer than most reads of its method do (the
``hedge_quantile`` of the pool's recent latencies of that method, clamped to ``hedge_min_delay_seconds`` ..
``hedge_max_delay_seconds``; the maximum until ``_MIN_SAMPLES`` are known), the same read goes to the next node, at
most ``hedge_max_extra`` times; the first answer wins and the other exchanges are cancelled (``UpstreamPool``).
Writes are never hedged.
"""

from __future__ import annotations

import collections
from typing import Final

from edgeplane.config import UpstreamSelectionSettings

# Latencies kept per method, and how many must be known before their quantile is trusted.
_SAMPLES: Final = 200
_MIN_SAMPLES: Final = 10
# The quantile is computed again after this many new latencies, not on every read (sorting 200 costs more than the
# rest of choosing a node).
_RECOMPUTE_EVERY: Final = 16


class HedgeDelays:
    """The recent latencies of one pool's reads per method, and the hedge delay they make."""

    def __init__(self, settings: UpstreamSelectionSettings) -> None:
        self._settings = settings
        self._latencies: dict[str, collections.deque[float]] = {}
        self._delays: dict[str, tuple[float, int]] = {}  # per method: the delay, and the latencies seen since

    def observe(self, method: str, seconds: float) -> None:
        """A read of ``method`` answered in ``seconds``."""
        samples = self._latencies.get(method)
        if samples is None:
            samples = self._latencies[method] = collections.deque(maxlen=_SAMPLES)
        samples.append(seconds)
        known = self._delays.get(method)
        if known is not None:
            self._delays[method] = (known[0], known[1] + 1)

    def delay(self, method: str) -> float:
        """How long a read of ``method`` waits before it is hedged."""
        settings = self._settings
        samples = self._latencies.get(method)
        if samples is None or len(samples) < _MIN_SAMPLES:
            return settings.hedge_max_delay_seconds
        known = self._delays.get(method)
        if known is not None and known[1] < _RECOMPUTE_EVERY:
            return known[0]
        ordered = sorted(samples)
        quantile = ordered[min(len(ordered) - 1, int(settings.hedge_quantile * len(ordered)))]
        delay = min(settings.hedge_max_delay_seconds, max(settings.hedge_min_delay_seconds, quantile))
        self._delays[method] = (delay, 0)
        return delay
