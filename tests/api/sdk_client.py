"""The official ``cloudflare`` SDK, unmodified, talking to the in-process control plane of ``tests/api/conftest.py``
(through its Starlette test client, so SQLite and PostgreSQL both run without starting a server)."""

from __future__ import annotations

from cloudflare import Cloudflare

from tests.api.conftest import Api


def sdk_for(api: Api, *, token: str | None = None) -> Cloudflare:
    """An SDK client authenticated with ``token`` (the bootstrap API token by default); no retries, so a status the
    SDK would retry is seen as it is."""
    return Cloudflare(
        base_url="http://testserver/client/v4",
        api_token=token or api.credentials["api_token"],
        http_client=api.client,
        max_retries=0,
    )


def sdk_by_key(api: Api) -> Cloudflare:
    """An SDK client authenticated with the user's global API key."""
    return Cloudflare(
        base_url="http://testserver/client/v4",
        api_key=api.credentials["api_key"],
        api_email=api.credentials["email"],
        http_client=api.client,
        max_retries=0,
    )
