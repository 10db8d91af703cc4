"""The roles of ``edgeplane serve`` one by one, on a real PostgreSQL: what each role refuses without the cluster's
database or bus, what an API node starts and registers, and what its ops listener says (``/healthz``, ``/readyz``,
``/metrics``), ready or not."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from edgeplane.store.cluster_nodes import registered_nodes
from edgeplane.store.database import Database
from tests.support.anvil import free_port
from tests.support.cluster_node import ClusterNodeProcess
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.nats_server import NatsCluster
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.e2e


def serve(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeplane", "serve", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--role", "edge"], "--role edge needs --database-url"),
        (["--role", "delivery", "--database-url", "postgresql://x@127.0.0.1/x"], "--role delivery needs --bus"),
        (["--role", "edge", "--database-url", "postgresql://x@127.0.0.1/x", "--bus", "http://a:1"], "nats://"),
        (["--role", "gateway"], "role"),
    ],
)
def test_a_role_without_what_it_needs_is_refused(tmp_path: Path, arguments: list[str], message: str) -> None:
    result = serve("--data-dir", str(tmp_path), *arguments)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_an_api_node_registers_and_is_ready(postgres: PostgresServer, tmp_path: Path) -> None:
    url = postgres.fresh_database("roles_api")
    node = ClusterNodeProcess("api", tmp_path / "api", database_url=url, bus="").start()
    try:
        assert set(node.credentials) >= {"email", "api_key", "api_token", "account_id", "zone_id", "zone_name"}
        readiness = node.readiness()
        assert readiness is not None
        assert readiness["role"] == "api"
        assert set(readiness["checks"]) == {"children", "database"}
        health = httpx.get(f"{node.ops_url}/healthz", timeout=5).json()
        assert health["role"] == "api"
        assert "edgeplane_" in httpx.get(f"{node.ops_url}/metrics", timeout=5).text
        database = Database(url)
        try:
            deadline = time.monotonic() + 10
            nodes = registered_nodes(database)
            while not nodes and time.monotonic() < deadline:
                time.sleep(0.1)
                nodes = registered_nodes(database)
            assert [seen.description.role for seen in nodes] == ["api"]
            assert f"api=http://127.0.0.1:{node.api_port}" in nodes[0].description.addresses
            assert nodes[0].seconds_since_heartbeat < 10
        finally:
            database.close()
    finally:
        node.stop()
    database = Database(url)
    try:
        assert registered_nodes(database) == []  # a node that stops cleanly leaves the register
    finally:
        database.close()


def test_a_delivery_node_without_its_bus_is_not_ready(postgres: PostgresServer, tmp_path: Path) -> None:
    url = postgres.fresh_database("roles_delivery")
    nowhere = f"nats://127.0.0.1:{free_port()}"
    node = ClusterNodeProcess("delivery", tmp_path / "delivery", database_url=url, bus=nowhere)
    process = subprocess.Popen(node.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        readiness = None
        while time.monotonic() < deadline:
            readiness = node.readiness()
            if readiness is not None:
                break
            time.sleep(0.2)
        assert readiness is not None
        assert readiness["ready"] is False
        assert readiness["checks"]["database"]["ok"] is True
        assert readiness["checks"]["bus"]["ok"] is False
        assert httpx.get(f"{node.ops_url}/readyz", timeout=5).status_code == 503
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_one_machine_with_a_bus_delivers_through_it(tmp_path: Path) -> None:
    # The role ``all`` with ``--bus``: the intake publishes the journals to the bus and delivery reads them there,
    # holding leases on SQLite (one machine, one JetStream server).
    nats = NatsCluster(size=1).start()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "edgeplane.toml").write_text(f"[bus]\nstream_replicas = 1\nretention_bytes = {64 << 20}\n")
    try:
        with EdgeplaneProcess(data_dir, extra_args=("--bus", nats.urls[0], "--edge-workers", "1")) as service:
            service.v4(
                "POST",
                "/zones/{zone}/logpush/jobs",
                json={
                    "dataset": "http_requests",
                    **service.file_destination("bus/{DATE}"),
                    "output_options": {"field_names": ["RayID"]},
                    "max_upload_records": 1000,
                    "enabled": True,
                },
            )
            time.sleep(1)  # the job's cursor is placed at the stream's end when delivery first runs it
            body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
            with httpx.Client(timeout=30) as client:
                rays = {client.post(service.rpc_url(), json=body).headers["cf-ray"].split("-")[0] for _ in range(1000)}
            out = data_dir / "destinations" / "bus"
            deadline = time.monotonic() + 60
            delivered: list[str] = []
            while time.monotonic() < deadline and len(delivered) < 1000:
                time.sleep(0.25)
                delivered = [
                    json.loads(line)["RayID"]
                    for path in sorted(out.rglob("*.log.gz"))
                    for line in gzip.decompress(path.read_bytes()).splitlines()
                ]
            assert sorted(delivered) == sorted(rays)
            assert not list((data_dir / "logs").rglob("*.seg")), "records went through the bus, not the local store"
    finally:
        nats.stop()
