"""Prometheus metrics of the service, defined once and exposed at ``GET /metrics`` on the API listener. The edge
workers and the API are separate processes under ``edgeplane serve``, so the values are shared through
prometheus_client's multiprocess directory (``PROMETHEUS_MULTIPROC_DIR``), and ``/metrics`` adds up every process's."""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

# The media type of ``exposition()``.
EXPOSITION_TYPE = CONTENT_TYPE_LATEST


def exposition() -> bytes:
    """Every metric in the Prometheus text format: of every process of ``edgeplane serve`` (added up from the shared
    multiprocess directory), or of this process alone when there is none."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()


GATEWAY_REQUESTS = Counter(
    "edgeplane_gateway_requests_total",
    "JSON-RPC requests (batch items count one each) by network, method and outcome. Outcomes: answered (the node "
    "answered, possibly with its own error), refused (method not allowed), invalid (envelope or params), "
    "limited (a gateway limit was exceeded), unavailable (no node could answer).",
    ["network", "method", "outcome"],
)

UPSTREAM_LATENCY = Histogram(
    "edgeplane_upstream_request_duration_seconds",
    "Time of one HTTP exchange with an upstream node.",
    ["network", "upstream"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

UPSTREAM_ERRORS = Counter(
    "edgeplane_upstream_errors_total",
    "Failed exchanges with an upstream node (connection errors, timeouts, HTTP 429/5xx, bad answers).",
    ["network", "upstream"],
)

UPSTREAM_HEALTHY = Gauge(
    "edgeplane_upstream_healthy",
    "1 when the node answered its last health check or call, else 0.",
    ["network", "upstream"],
    multiprocess_mode="max",
)

GATEWAY_CACHE_LOOKUPS = Counter(
    "edgeplane_gateway_cache_lookups_total",
    "Single requests of cacheable methods by network and what the response cache did: hit (answered from the cache), "
    "miss (asked a node, and kept the answer if it could), bypass (asked a node: the request names the pending block, "
    "or the head block could not be read).",
    ["network", "result"],
)
UPSTREAM_HEAD = Gauge(
    "edgeplane_upstream_head_block",
    "The latest head block number seen from the node.",
    ["network", "upstream"],
    multiprocess_mode="max",
)

RATELIMIT_ACTIONS = Counter(
    "edgeplane_ratelimit_actions_total",
    "Requests a rate limiting rule acted on (the request was over the rule's rate), by rule id and action (block, "
    "a challenge answered as a block, or log).",
    ["rule", "action"],
)

RATELIMIT_EVICTIONS = Counter(
    "edgeplane_ratelimit_counter_evictions_total",
    "Rate limiting counters given up for a new key because their bucket of the node's table was full (what gives "
    "way first under a flood of distinct keys: the least loaded counter, whose count the new key inherits).",
)

RATELIMIT_COUNTERS = Gauge(
    "edgeplane_ratelimit_counters",
    "The node's rate limiting counter table: live (counters of keys seen within two periods) and slots (its size).",
    ["kind"],
    multiprocess_mode="max",
)

UPSTREAM_SCORE = Gauge(
    "edgeplane_upstream_score",
    "A node's score for reads, 0 to 1 (1: as good as the best node of its network): the product of the factors of "
    "edgeplane_upstream_score_factor.",
    ["network", "upstream"],
    multiprocess_mode="livemostrecent",
)

UPSTREAM_SCORE_FACTOR = Gauge(
    "edgeplane_upstream_score_factor",
    "The parts of a node's score, 0 to 1: latency (the fastest node's over its), errors and throttling (1 less their "
    "share of its last exchanges), lag (of its head behind the network's).",
    ["network", "upstream", "factor"],
    multiprocess_mode="livemostrecent",
)

UPSTREAM_STATE = Gauge(
    "edgeplane_upstream_state",
    "1 for a node's state, 0 for the others: ok, lagging (more than max_lag_blocks), half_open or open (its circuit), "
    "failing (its last exchange or check failed).",
    ["network", "upstream", "state"],
    multiprocess_mode="livemostrecent",
)
