"""CRS 3.3.4's own regression suite through the running edge: every case's request, as the suite sends it, to
``edgeplane serve``, and the CRS rules behind the firewall events it records, as Coraza runs CRS's suite to claim
compatibility.

The zone's managed phase executes the OWASP Core Ruleset at paranoia level 4 (no category disabled), every core
rule overridden to ``log`` (so each rule that fires leaves a ``firewall_events`` record naming its CRS id in ``Ref``)
and the score rule off. A Logpush job writes the events to a file. Each request goes over its own connection, bytes
as the case gives them (``Host: localhost``, a web3 hostname of the bootstrap zone); its ``cf-ray`` answer header
joins it to its events. A case passes when every id of its ``log_contains`` fired and none of its
``no_log_contains`` did (``../shared/waf/README.md``).

What the edge does differently from the in-process run (``tests/seclang/test_crs_regression.py``) is listed in
``crs_edge_known_failures.toml`` with a reason each: requests the edge's HTTP server refuses before any rule runs,
and the settings of CRS's regression setup (UTF-8 validation, argument length limits) that a deployment cannot set
through the Rulesets API. The corpus is read in place from ``../shared/waf`` and never copied.
"""

from __future__ import annotations

import gzip
import json
import re
import socket
import sys
import time
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgeplane.waf.catalogue import OWASP_RULESET_ID, OWASP_SCORE_RULE_ID, load_catalogue
from tests.support import crs_corpus
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

KNOWN_FAILURES = Path(__file__).with_name("crs_edge_known_failures.toml")
PASS_RATE_FLOOR = 0.99
SENTINEL_PATH = "/edgeplane-crs-regression-sentinel"
READY_PATH = "/edgeplane-crs-regression-ready"

if not crs_corpus.available():
    pytest.skip("CRS's regression corpus is not beside the repository", allow_module_level=True)
if OWASP_RULESET_ID not in load_catalogue():
    pytest.skip("the OWASP Core Rule Set is not installed", allow_module_level=True)


def raw_request(request: dict[str, Any]) -> bytes:
    """The case's request as the suite's runner puts it on the wire."""
    body = crs_corpus.request_body(request)
    line = f"{request['method']} {request['uri']} {request['version']}".encode()
    headers = b"".join(f"{name}: {value}\r\n".encode() for name, value in request["headers"])
    return line + b"\r\n" + headers + b"\r\n" + body


def send(port: int, data: bytes) -> tuple[int | None, str | None]:
    """Status and ray id of the answer to ``data`` (None, None when the connection ends without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            received += chunk
    head = received.partition(b"\r\n\r\n")[0].decode("latin-1")
    if not head.startswith("HTTP/"):
        return None, None
    status = int(head.split()[1])
    ray = re.search(r"(?im)^cf-ray:\s*([0-9a-f]{16})", head)
    return status, ray.group(1) if ray else None


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("crs-edge") / "data"
    data_dir.mkdir()
    # One edge worker: its events reach the job in the order of the requests, so the sentinel, sent last, arrives
    # last.
    (data_dir / "edgeplane.toml").write_text("edge_workers = 1\n")
    with EdgeplaneProcess(data_dir) as process:
        core = [rule for rule in load_catalogue()[OWASP_RULESET_ID].rules if rule.crs_id is not None]
        overrides = [{"id": rule.id, "action": "log"} for rule in core]
        overrides.append({"id": OWASP_SCORE_RULE_ID, "enabled": False})
        process.v4(
            "PUT",
            "/zones/{zone}/rulesets/phases/http_request_firewall_managed/entrypoint",
            json={
                "rules": [
                    {
                        "action": "execute",
                        "expression": "true",
                        "action_parameters": {"id": OWASP_RULESET_ID, "overrides": {"rules": overrides}},
                    }
                ]
            },
        )
        process.v4(
            "PUT",
            "/zones/{zone}/rulesets/phases/http_request_firewall_custom/entrypoint",
            json={
                "rules": [
                    {"action": "log", "expression": f'http.request.uri.path eq "{SENTINEL_PATH}"'},
                    {"action": "block", "expression": f'http.request.uri.path eq "{READY_PATH}"'},
                ]
            },
        )
        process.v4(
            "POST",
            "/zones/{zone}/logpush/jobs",
            json={
                "name": "crs-regression",
                "dataset": "firewall_events",
                **process.file_destination("crs"),
                "output_options": {"field_names": ["RayID", "Ref", "Source"]},
                "max_upload_records": 5000,
                "max_upload_interval_seconds": 30,
                "enabled": True,
            },
        )
        wait_until_deployed(process)
        yield process


def wait_until_deployed(process: EdgeplaneProcess) -> None:
    """Waits until the edge answers with the configuration written above: the custom phase's block of
    ``READY_PATH`` is in the same snapshot as the managed phase written before it, and the worker compiles the CRS
    (seconds) before it swaps the snapshot in."""
    port = int(process.edge_url.rsplit(":", 1)[1])
    probe = f"GET {READY_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    deadline = time.monotonic() + 90
    while send(port, probe)[0] != 403:
        assert time.monotonic() < deadline, "the edge did not apply the deployment"
        time.sleep(0.2)


def read_events(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.rglob("*.gz"))
        for line in gzip.decompress(path.read_bytes()).splitlines()
        if line
    ]


def test_crs_regression_suite_through_the_edge(service: EdgeplaneProcess) -> None:
    cases = crs_corpus.load_cases()
    port = int(service.edge_url.rsplit(":", 1)[1])
    rays: dict[str, str | None] = {}
    statuses: dict[str, int | None] = {}
    started = time.perf_counter()
    for case in cases:
        statuses[case["id"]], rays[case["id"]] = send(port, raw_request(case["request"]))
    elapsed = time.perf_counter() - started
    sentinel = send(port, f"GET {SENTINEL_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())[1]
    destination = service.data_dir / "destinations" / "crs"
    deadline = time.monotonic() + 120
    events: list[dict[str, Any]] = []
    # The job uploads a full batch at once, a partial one at its 30 s interval: more sentinels (an event each, logged
    # by the custom rule) fill the batch the first one is in, which is quicker than waiting for the interval.
    with httpx.Client(base_url=service.edge_url, headers={"host": "localhost"}, timeout=30) as client:
        while time.monotonic() < deadline:
            events = read_events(destination)
            if sentinel in {event["RayID"] for event in events}:
                break
            for _ in range(250):
                client.get(SENTINEL_PATH)
            time.sleep(0.2)
    assert sentinel is not None, "the sentinel request was not answered with a ray id"
    # Only once the sentinel's event arrived are the events of every case before it at the destination.
    assert sentinel in {event["RayID"] for event in events}, "the sentinel's event did not arrive in 120 s"
    fired: dict[str, set[int]] = defaultdict(set)
    for event in events:
        if event["Source"] == "firewallManaged":
            fired[event["RayID"]].add(int(event["Ref"]))
    known = tomllib.loads(KNOWN_FAILURES.read_text())["failures"]
    failing: dict[str, str] = {}
    by_family: dict[str, list[bool]] = defaultdict(list)
    for case in cases:
        ray = rays[case["id"]]
        got = fired.get(ray, set()) if ray else set()
        missing = crs_corpus.expected_ids(case) - got
        unexpected = crs_corpus.forbidden_ids(case) & got
        passed = not missing and not unexpected
        by_family[case["family"]].append(passed)
        if not passed:
            failing[case["id"]] = (
                f"status {statuses[case['id']]}, missing {sorted(missing)}, unexpected {sorted(unexpected)}"
            )
    rate = 1 - len(failing) / len(cases)
    report = [
        f"CRS 3.3.4 regression through the edge: {len(cases) - len(failing)}/{len(cases)} ({100 * rate:.2f} %), "
        f"{elapsed:.1f} s to send, {1e3 * elapsed / len(cases):.1f} ms per case"
    ]
    report += [f"  {family}: {sum(ok)}/{len(ok)}" for family, ok in sorted(by_family.items())]
    report += [f"  FAIL {case_id}: {why}" for case_id, why in failing.items()]
    sys.stdout.write("\n" + "\n".join(report) + "\n")
    assert rate >= PASS_RATE_FLOOR, "\n".join(report)
    unexplained = sorted(set(failing) - set(known))
    assert not unexplained, "failing and not in crs_edge_known_failures.toml:\n" + "\n".join(
        f"{case_id}: {failing[case_id]}" for case_id in unexplained
    )
    passing = sorted(set(known) - set(failing))
    assert not passing, f"passing, yet listed in crs_edge_known_failures.toml (remove them): {passing}"
