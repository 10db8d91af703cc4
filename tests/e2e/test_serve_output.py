"""What ``edgeplane serve`` writes is in one format, its children's lines included (the development chain's too):
with ``--log-format json``, every line is a JSON object with its event, level and logger."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def test_every_line_serve_writes_is_a_json_object(tmp_path: Path) -> None:
    service = EdgeplaneProcess(tmp_path / "data")
    with service:
        # A network without an upstream: served by the development chain, a child of its own.
        body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        answer = httpx.post(service.rpc_url("sepolia"), json=body, timeout=30).json()
        assert "result" in answer, answer
    lines = [line for line in service.log_path.read_text().splitlines() if line.strip()]
    loggers = set()
    for line in lines:
        record = json.loads(line)  # fails on a console line
        assert isinstance(record, dict), line
        assert {"event", "level", "logger"} <= record.keys(), line
        loggers.add(record["logger"])
    assert "edgeplane.chain.runner" in loggers  # the development chain's own lines are among them
