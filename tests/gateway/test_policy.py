"""The method policy of seed 000 is data, loaded from the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgeplane.gateway.policy import load_method_policy, parse_method_policy

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "000_2df1524adb732cb2.txt"


def _seed_list(heading: str) -> list[str]:
    text = SEED.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n\n", 2)[1]
    return [re.sub(r"\s*\(limit [AB]\)", "", name).strip().rstrip(".") for name in section.split(",")]


@pytest.mark.skipif(not SEED.exists(), reason="the shared seeds are not beside the project")
def test_policy_matches_the_seed() -> None:
    policy = load_method_policy()
    assert sorted(policy.supported) == sorted(_seed_list("### Supported methods (answered)"))
    assert sorted(policy.unsupported) == sorted(_seed_list("### Unsupported methods (rejected with 403)"))


def test_policy_counts_and_limits() -> None:
    policy = load_method_policy()
    assert len(policy.supported) == 33
    assert len(policy.unsupported) == 19
    assert policy.limits.eth_get_logs_max_block_range == 800
    assert policy.limits.eth_fee_history_max_block_count == 10
    assert policy.limits.trace_filter_max_block_range == 800
    assert policy.limits.trace_filter_max_count == 200
    assert policy.allows("eth_call")
    assert not policy.allows("eth_accounts")
    assert not policy.allows("debug_traceTransaction")


def test_a_method_cannot_be_both_supported_and_unsupported() -> None:
    data = {
        "supported": ["eth_call"],
        "unsupported": ["eth_call"],
        "limits": {
            "eth_getLogs_max_block_range": 1,
            "eth_feeHistory_max_block_count": 1,
            "trace_filter_max_block_range": 1,
            "trace_filter_max_count": 1,
        },
    }
    with pytest.raises(ValueError, match="both supported and unsupported"):
        parse_method_policy(data)


def test_realtime_methods_are_cacheable_ones() -> None:
    assert load_method_policy().realtime == {"eth_gasPrice", "eth_blockNumber"}
    data = {
        "supported": ["eth_call", "eth_gasPrice"],
        "unsupported": [],
        "cacheable": ["eth_call"],
        "realtime": ["eth_gasPrice"],
        "limits": {
            "eth_getLogs_max_block_range": 1,
            "eth_feeHistory_max_block_count": 1,
            "trace_filter_max_block_range": 1,
            "trace_filter_max_count": 1,
        },
    }
    with pytest.raises(ValueError, match="realtime methods must be cacheable"):
        parse_method_policy(data)
