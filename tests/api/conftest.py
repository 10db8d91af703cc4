"""The control plane in process, against SQLite and against a real PostgreSQL server the suite starts itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.store.database import Database


class Api:
    """A v4 client with the bootstrap credentials."""

    def __init__(self, client: TestClient, credentials: dict[str, Any], changes: list[int]) -> None:
        self.client = client
        self.credentials = credentials
        self.changes = changes

    @property
    def token_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credentials['api_token']}"}

    @property
    def key_headers(self) -> dict[str, str]:
        return {"X-Auth-Email": self.credentials["email"], "X-Auth-Key": self.credentials["api_key"]}

    def call(self, method: str, path: str, *, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        return self.client.request(method, f"/client/v4{path}", headers=headers or self.token_headers, **kwargs)


@pytest.fixture
def api(database: Database, tmp_path: Path) -> Iterator[Api]:
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    changes: list[int] = []
    plane = ControlPlane(
        database,
        secret=b"test-secret",
        on_change=lambda: changes.append(1),
        destinations=DestinationPolicy(file_root=tmp_path),  # file:// destinations under the test's directory
    )
    with TestClient(build_api_app(plane)) as client:
        yield Api(client, credentials, changes)
