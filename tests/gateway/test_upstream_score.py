"""A node's score and circuit breaker as exchanges come in (docs/gateway.md, "Scored selection and the circuit
breaker"): the factors, the window, when the circuit opens, half-opens and closes."""

from __future__ import annotations

import time

import pytest

from edgeplane.config import UpstreamSelectionSettings
from edgeplane.gateway.upstream_score import UpstreamScore

SETTINGS = UpstreamSelectionSettings(
    window_exchanges=10, circuit_min_exchanges=4, circuit_failure_ratio=0.5, circuit_half_open_after_seconds=0.05
)


@pytest.mark.parametrize(
    ("outcomes", "circuit"),
    [
        ("ok ok ok ok", "closed"),
        ("failed failed failed", "closed"),  # fewer than circuit_min_exchanges
        ("failed failed failed failed", "open"),
        ("ok ok failed failed", "open"),  # half of four
        ("ok ok ok failed failed", "closed"),  # two of five
        ("ok ok throttled throttled", "open"),  # throttling counts as failing
        ("ok " * 10 + "failed failed failed", "closed"),  # three of the window's ten
        ("ok " * 10 + "failed " * 5, "open"),  # the window keeps the last ten: five of them
    ],
)
def test_when_the_circuit_opens(outcomes: str, circuit: str) -> None:
    score = UpstreamScore(SETTINGS)
    for outcome in outcomes.split():
        if outcome == "ok":
            score.answered("eth_call", 0.01)
        else:
            score.failed(throttled=outcome == "throttled")
    assert score.state() == circuit


def test_half_open_lets_one_probe_through_and_its_answer_closes() -> None:
    score = UpstreamScore(SETTINGS)
    for _ in range(4):
        score.failed()
    assert not score.takes_reads()
    time.sleep(0.06)
    assert score.state() == "half_open"
    assert score.takes_reads()  # the probe
    assert not score.takes_reads()  # only one
    score.answered("eth_call", 0.01)
    assert score.state() == "closed"
    assert score.failure_counts() == (0, 0)  # its record cleared


def test_a_failed_probe_opens_the_circuit_for_another_pause() -> None:
    score = UpstreamScore(SETTINGS)
    for _ in range(4):
        score.failed()
    time.sleep(0.06)
    assert score.takes_reads()
    score.failed()
    assert score.state() == "open"


def test_the_factors() -> None:
    score = UpstreamScore(SETTINGS)
    for _ in range(3):
        score.answered("eth_call", 0.2)
    score.answered("eth_call", 0.2, throttled=True)
    score.failed()
    factors = score.factors("eth_call", fastest=0.05, lag_blocks=8, max_lag_blocks=15)
    assert factors.latency == pytest.approx(0.25)
    assert factors.errors == pytest.approx(0.8)
    assert factors.throttling == pytest.approx(0.8)
    assert factors.lag == pytest.approx(0.5)
    assert factors.score == pytest.approx(0.25 * 0.8 * 0.8 * 0.5)
    # A method it never served: its latency over every method.
    assert score.latency("eth_getLogs") == score.latency("eth_call")
    fresh = UpstreamScore(SETTINGS).factors("eth_call", fastest=0.05, lag_blocks=None, max_lag_blocks=16)
    assert fresh.score == 1.0  # nothing known: as good as the best, so that it is tried
