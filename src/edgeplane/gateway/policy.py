"""The method policy: which methods the gateway answers, and the limits it enforces before any upstream call.

The policy is data (``method_policy.toml`` beside this module), loaded once at start.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class GatewayLimits:
    """Per-method limits. Block ranges count both ends."""

    eth_get_logs_max_block_range: int
    eth_fee_history_max_block_count: int
    trace_filter_max_block_range: int
    trace_filter_max_count: int


@dataclass(frozen=True, slots=True)
class MethodPolicy:
    """The answered methods, the explicitly refused ones, and the limits."""

    supported: frozenset[str]
    unsupported: tuple[str, ...]
    non_idempotent: frozenset[str]
    cacheable: frozenset[str]
    limits: GatewayLimits
    realtime: frozenset[str] = frozenset()

    def allows(self, method: str) -> bool:
        """True when the gateway answers ``method``; every other name is refused with HTTP 403."""
        return method in self.supported


def load_method_policy() -> MethodPolicy:
    """Reads the policy shipped with the package. Raises ``ValueError`` if the data file is inconsistent."""
    text = resources.files(__package__).joinpath("method_policy.toml").read_text(encoding="utf-8")
    return parse_method_policy(tomllib.loads(text))


def parse_method_policy(data: dict[str, Any]) -> MethodPolicy:
    """Builds a policy from the TOML document's data."""
    supported = frozenset(str(name) for name in data["supported"])
    unsupported = tuple(str(name) for name in data["unsupported"])
    overlap = supported.intersection(unsupported)
    if overlap:
        raise ValueError(f"methods both supported and unsupported: {sorted(overlap)}")
    non_idempotent = frozenset(str(name) for name in data.get("non_idempotent", []))
    cacheable = frozenset(str(name) for name in data.get("cacheable", []))
    if not cacheable <= supported - non_idempotent:
        raise ValueError(
            f"cacheable methods must be supported reads: {sorted(cacheable - (supported - non_idempotent))}"
        )
    realtime = frozenset(str(name) for name in data.get("realtime", []))
    if not realtime <= cacheable:
        raise ValueError(f"realtime methods must be cacheable: {sorted(realtime - cacheable)}")
    limits = data["limits"]
    return MethodPolicy(
        realtime=realtime,
        supported=supported,
        unsupported=unsupported,
        non_idempotent=non_idempotent,
        cacheable=cacheable,
        limits=GatewayLimits(
            eth_get_logs_max_block_range=int(limits["eth_getLogs_max_block_range"]),
            eth_fee_history_max_block_count=int(limits["eth_feeHistory_max_block_count"]),
            trace_filter_max_block_range=int(limits["trace_filter_max_block_range"]),
            trace_filter_max_count=int(limits["trace_filter_max_count"]),
        ),
    )
