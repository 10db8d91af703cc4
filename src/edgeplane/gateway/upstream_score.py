"""What the pool knows of how well one upstream node serves: its recent latency per method, its error and throttling
rates over a window of exchanges, and its circuit breaker; and the score made of them, which orders the nodes a read
is tried on.

The score is a product of factors between 0 and 1, each readable by itself (``ScoreFactors``): ``latency`` (the
fastest node's smoothed latency for the method over this node's, 1 for the fastest), ``errors`` (1 less the share
of failed exchanges in the window), ``throttling`` (1 less the share answered HTTP 429 or -32005), ``lag`` (1 less
the node's head lag over ``max_lag_blocks`` + 1). So 1 is a node as good as the best, and 0.5 one half as good.

The circuit breaker: when at least ``circuit_min_exchanges`` exchanges are in the window and the share that failed
reaches ``circuit_failure_ratio``, the circuit opens and the node takes no reads (but as a last resort); after
``circuit_half_open_after_seconds`` it is half-open: one read is let through as a probe, whose success closes the
circuit (and clears the window) and whose failure opens it for another pause.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Final, Literal

from edgeplane.config import UpstreamSelectionSettings

CircuitState = Literal["closed", "open", "half_open"]
_OVERALL: Final = ""  # the latency of every method together
# A half-open probe that has not come back in this long no longer holds the circuit.
_PROBE_PATIENCE_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class ScoreFactors:
    """The parts of a score, each between 0 and 1 (see the module docstring)."""

    latency: float
    errors: float
    throttling: float
    lag: float

    @property
    def score(self) -> float:
        return self.latency * self.errors * self.throttling * self.lag


class UpstreamScore:
    """One node's record of recent exchanges and its circuit."""

    def __init__(self, settings: UpstreamSelectionSettings) -> None:
        self._settings = settings
        self._latency: dict[str, float] = {}
        # Outcomes of the last exchanges: "ok", "failed" or "throttled".
        self._window: collections.deque[str] = collections.deque(maxlen=settings.window_exchanges)
        self._counts: collections.Counter[str] = collections.Counter()  # of the window's outcomes
        self.circuit: CircuitState = "closed"
        self._opened_at = 0.0
        self._probe_sent_at: float | None = None

    # -- recording ---------------------------------------------------------------------------------------------

    def answered(self, method: str, seconds: float, *, throttled: bool = False) -> None:
        """An exchange that came back with an answer (a node's own error included) in ``seconds``."""
        self._observe(method, seconds)
        self._record("throttled" if throttled else "ok")
        if self.circuit != "closed":
            self.circuit = "closed"
            self._window.clear()
            self._counts.clear()
            self._probe_sent_at = None

    def observe_latency(self, seconds: float) -> None:
        """A latency seen outside a client's read (a health check): the overall latency only."""
        self._observe(_OVERALL, seconds, method_too=False)

    def failed(self, *, throttled: bool = False) -> None:
        """An exchange that failed in transport (HTTP 429 when ``throttled``)."""
        self._record("throttled" if throttled else "failed")
        now = time.monotonic()
        if self.circuit != "closed":
            self.circuit, self._opened_at, self._probe_sent_at = "open", now, None
            return
        settings = self._settings
        failures = len(self._window) - self._counts["ok"]
        if len(self._window) >= settings.circuit_min_exchanges and failures >= settings.circuit_failure_ratio * len(
            self._window
        ):
            self.circuit, self._opened_at = "open", now

    def _record(self, outcome: str) -> None:
        window = self._window
        if len(window) == window.maxlen:
            self._counts[window[0]] -= 1
        window.append(outcome)
        self._counts[outcome] += 1

    def _observe(self, method: str, seconds: float, *, method_too: bool = True) -> None:
        weight = self._settings.latency_smoothing
        for key in (method, _OVERALL) if method_too and method else (_OVERALL,):
            known = self._latency.get(key)
            self._latency[key] = seconds if known is None else known + weight * (seconds - known)

    # -- reading -----------------------------------------------------------------------------------------------

    def latency(self, method: str) -> float | None:
        """The smoothed latency of ``method`` on this node (of every method when it has none), None when unknown."""
        return self._latency.get(method, self._latency.get(_OVERALL))

    def failure_counts(self) -> tuple[int, int]:
        """The window's failed (throttled ones included) and total exchanges."""
        return len(self._window) - self._counts["ok"], len(self._window)

    def state(self, now: float | None = None) -> CircuitState:
        """The circuit's state now: an open circuit whose pause has passed is half-open."""
        if self.circuit == "open":
            now = time.monotonic() if now is None else now
            if now - self._opened_at >= self._settings.circuit_half_open_after_seconds:
                return "half_open"
        return self.circuit

    def takes_reads(self) -> bool:
        """Whether the node may take a read now: a closed circuit, or a half-open one whose probe is not out yet
        (taking the probe: the next call of a half-open node says no until the probe came back)."""
        now = time.monotonic()
        state = self.state(now)
        if state == "closed":
            return True
        if state == "open":
            return False
        if self._probe_sent_at is not None and now - self._probe_sent_at < _PROBE_PATIENCE_SECONDS:
            return False
        self._probe_sent_at = now
        return True

    def factors(self, method: str, fastest: float | None, lag_blocks: int | None, max_lag_blocks: int) -> ScoreFactors:
        """The score's factors for a read of ``method``, given the fastest node's latency for it and this node's head
        lag (None when unknown)."""
        mine = self.latency(method)
        latency = 1.0 if mine is None or fastest is None or mine <= 0 else min(1.0, fastest / mine)
        outcomes = len(self._window)
        failed, throttled = self._counts["failed"], self._counts["throttled"]
        errors = 1.0 - failed / outcomes if outcomes else 1.0
        throttling = 1.0 - throttled / outcomes if outcomes else 1.0
        lag = 1.0 if not lag_blocks or lag_blocks < 0 else max(0.0, 1.0 - lag_blocks / (max_lag_blocks + 1))
        return ScoreFactors(latency, errors, throttling, lag)
