"""The dashboard's sessions: the store (hashed ids, expiry, sign out, CSRF tokens), signing in at ``/session`` with a
password or an API token, and the session cookie on the v4 API, where it does exactly what its user or token may and
needs the CSRF token to change anything. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import text

from edgeplane.api.credentials import password_hash, password_matches, secret_hash
from edgeplane.api.dashboard_sessions import (
    SESSION_LIFETIME,
    close_session,
    csrf_token,
    csrf_token_matches,
    live_session,
    open_session,
)
from edgeplane.api.permissions import ZONE_SCOPE
from edgeplane.api.sign_in import SignInThrottle
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.store.database import MIGRATIONS, Database
from edgeplane.store.models import DashboardSession, User
from tests.api.conftest import Api


def admin_id(database: Database) -> str:
    with database.session() as session:
        user = session.query(User).one()
        return user.id


# The session store


def test_a_session_is_kept_by_its_ids_hash_until_it_expires(api: Api, database: Database) -> None:
    now = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    with database.session() as session:
        opened = open_session(session, user_id=admin_id(database), token_id=None, now=now)
    assert opened.expires_on == now + SESSION_LIFETIME
    with database.session() as session:
        assert session.get(DashboardSession, opened.session_id) is None  # never the id itself
        assert session.get(DashboardSession, secret_hash(opened.session_id)) is not None
        assert live_session(session, opened.session_id, now=now + SESSION_LIFETIME - timedelta(seconds=1))
        assert live_session(session, opened.session_id, now=now + SESSION_LIFETIME) is None
        assert live_session(session, "not-a-session", now=now) is None


def test_opening_a_session_removes_the_expired_ones(api: Api, database: Database) -> None:
    now = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    user_id = admin_id(database)
    with database.session() as session:
        old = open_session(session, user_id=user_id, token_id=None, now=now)
    with database.session() as session:
        new = open_session(session, user_id=user_id, token_id=None, now=now + SESSION_LIFETIME)
    with database.session() as session:
        stored = {record.id_hash for record in session.query(DashboardSession).all()}
    assert stored == {secret_hash(new.session_id)}
    assert secret_hash(old.session_id) not in stored


def test_a_closed_session_is_gone(api: Api, database: Database) -> None:
    with database.session() as session:
        opened = open_session(session, user_id=admin_id(database), token_id=None)
    with database.session() as session:
        close_session(session, opened.session_id)
        close_session(session, opened.session_id)  # again: nothing
    with database.session() as session:
        assert live_session(session, opened.session_id) is None


def test_each_session_has_its_own_csrf_token() -> None:
    first, second = "a" * 43, "b" * 43
    assert csrf_token(first) != csrf_token(second)
    assert csrf_token_matches(first, csrf_token(first))
    assert not csrf_token_matches(first, csrf_token(second))
    assert not csrf_token_matches(first, None)
    assert not csrf_token_matches(first, "")


def test_passwords_are_kept_salted_and_checked() -> None:
    stored = password_hash("correct horse")
    assert stored.startswith("scrypt$")
    assert stored != password_hash("correct horse")  # salted
    assert password_matches("correct horse", stored)
    assert not password_matches("correct hors", stored)
    for malformed in ("", "scrypt$", "sha256$1$2$3$aa$bb", "scrypt$x$8$1$aa$bb", "scrypt$16384$8$1$zz$bb"):
        assert not password_matches("correct horse", malformed)


def test_the_throttle_refuses_a_client_over_its_failures_until_they_age() -> None:
    now = [0.0]
    throttle = SignInThrottle(max_failures=3, window_seconds=60, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.retry_after("192.0.2.1") == 0
        throttle.record_failure("192.0.2.1")
        now[0] += 10
    assert throttle.retry_after("192.0.2.1") == pytest.approx(30)
    assert throttle.retry_after("192.0.2.2") == 0  # another client
    now[0] = 60.5
    assert throttle.retry_after("192.0.2.1") == 0


# The bootstrap password


def test_first_start_writes_a_password_and_keeps_its_hash(api: Api, database: Database) -> None:
    password = api.credentials["password"]
    assert len(password) == 24
    with database.session() as session:
        stored = session.query(User).one().password_hash
    assert stored is not None
    assert password not in stored
    assert password_matches(password, stored)


def test_a_data_directory_without_a_password_gets_one_and_keeps_its_keys(database: Database, tmp_path: Path) -> None:
    ensure_bootstrap(tmp_path, database)
    path = tmp_path / "credentials.json"
    before = json.loads(path.read_text())
    del before["password"]
    before["note"] = "a key this version does not know"
    path.write_text(json.dumps(before))
    with database.session() as session:
        session.query(User).one().password_hash = None

    assert ensure_bootstrap(tmp_path, database) is False
    after = json.loads(path.read_text())
    assert {key: after[key] for key in before} == before
    assert len(after["password"]) == 24
    assert path.stat().st_mode & 0o777 == 0o600
    with database.session() as session:
        stored = session.query(User).one().password_hash
    assert stored is not None
    assert password_matches(after["password"], stored)

    ensure_bootstrap(tmp_path, database)  # a later start changes nothing
    assert json.loads(path.read_text()) == after


# Signing in at /session, and the cookie on the v4 API


def sign_in(api: Api, body: dict[str, str]) -> Any:
    return api.client.post("/session", json=body)


def session_cookie(response: Any) -> tuple[str, SimpleCookie]:
    cookie: SimpleCookie = SimpleCookie()
    cookie.load(response.headers["set-cookie"])
    return cookie["edgeplane_session"].value, cookie


def cookie_headers(session_id: str, **extra: str) -> dict[str, str]:
    return {"Cookie": f"edgeplane_session={session_id}", **extra}


def test_password_sign_in_sets_a_strict_http_only_secure_cookie(api: Api) -> None:
    response = sign_in(api, {"email": api.credentials["email"], "password": api.credentials["password"]})
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert body["result"]["user"]["email"] == api.credentials["email"]
    assert body["result"]["token_id"] is None
    session_id, cookie = session_cookie(response)
    morsel = cookie["edgeplane_session"]
    assert morsel["httponly"]
    assert morsel["secure"]
    assert morsel["samesite"].lower() == "strict"
    assert morsel["path"] == "/"
    assert int(morsel["max-age"]) == int(SESSION_LIFETIME.total_seconds())
    assert body["result"]["csrf_token"] == csrf_token(session_id)

    current = api.client.get("/session", headers=cookie_headers(session_id)).json()
    assert current["result"]["csrf_token"] == csrf_token(session_id)
    zones = api.call("GET", "/zones", headers=cookie_headers(session_id)).json()
    assert [zone["name"] for zone in zones["result"]] == ["localhost"]


@pytest.mark.parametrize(
    ("body", "status", "codes"),
    [
        ({"email": "admin@edgeplane.localhost", "password": "wrong"}, 401, [10000, 9113]),
        ({"email": "nobody@example.com", "password": "wrong"}, 401, [10000, 9113]),
        ({"token": "a" * 40}, 401, [1000, 9109]),
        ({"token": "short"}, 401, [1000, 9109]),
        ({"email": "admin@edgeplane.localhost"}, 400, [6007]),
        ({"email": "a", "password": "b", "token": "c"}, 400, [6007]),
    ],
)
def test_wrong_credentials_are_refused(api: Api, body: dict[str, str], status: int, codes: list[int]) -> None:
    response = sign_in(api, body)
    assert response.status_code == status
    assert [error["code"] for error in response.json()["errors"]] == codes
    assert "set-cookie" not in response.headers


def test_sign_in_takes_only_json(api: Api) -> None:
    form = {"email": api.credentials["email"], "password": api.credentials["password"]}
    response = api.client.post("/session", data=form)
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == 6003


def test_failed_sign_ins_are_rate_limited(api: Api) -> None:
    wrong = {"email": api.credentials["email"], "password": "wrong"}
    for _ in range(5):
        assert sign_in(api, wrong).status_code == 401
    refused = sign_in(api, {"email": api.credentials["email"], "password": api.credentials["password"]})
    assert refused.status_code == 429
    assert refused.json()["errors"][0]["code"] == 971
    assert int(refused.headers["retry-after"]) >= 1


def test_a_write_with_the_cookie_needs_the_csrf_token(api: Api) -> None:
    response = sign_in(api, {"email": api.credentials["email"], "password": api.credentials["password"]})
    session_id, _ = session_cookie(response)
    path = f"/zones/{api.credentials['zone_id']}/web3/hostnames"
    hostname = {"name": "gw.localhost", "target": "ethereum"}
    for headers in (cookie_headers(session_id), cookie_headers(session_id, **{"X-CSRF-Token": "0" * 64})):
        refused = api.call("POST", path, headers=headers, json=hostname)
        assert refused.status_code == 403
        body = refused.json()
        assert body["success"] is False
        assert body["result"] is None
        assert [error["code"] for error in body["errors"]] == [10000, 9111]
    listed = api.call("GET", path).json()["result"]
    assert "gw.localhost" not in [item["name"] for item in listed]

    created = api.call(
        "POST", path, headers=cookie_headers(session_id, **{"X-CSRF-Token": csrf_token(session_id)}), json=hostname
    )
    assert created.json()["success"] is True


def test_a_token_session_may_do_what_the_token_may(api: Api) -> None:
    zone = {f"{ZONE_SCOPE}.{api.credentials['zone_id']}": "*"}
    policies = [{"effect": "allow", "resources": zone, "permission_groups": [{"name": "Web3 Hostnames Read"}]}]
    made = api.call("POST", "/user/tokens", json={"name": "read only", "policies": policies}).json()["result"]
    response = sign_in(api, {"token": made["value"]})
    assert response.status_code == 200
    assert response.json()["result"]["token_id"] == made["id"]
    session_id, _ = session_cookie(response)
    writing = cookie_headers(session_id, **{"X-CSRF-Token": csrf_token(session_id)})
    path = f"/zones/{api.credentials['zone_id']}/web3/hostnames"

    assert api.call("GET", path, headers=writing).json()["success"] is True
    refused = api.call("POST", path, headers=writing, json={"name": "gw.localhost", "target": "ethereum"})
    assert refused.status_code == 403
    assert api.call("GET", f"/zones/{api.credentials['zone_id']}/rulesets", headers=writing).status_code == 403

    # Revoking the token ends what its sessions may do at once.
    assert api.call("DELETE", f"/user/tokens/{made['id']}").json()["success"] is True
    after = api.call("GET", path, headers=writing)
    assert after.status_code == 401
    assert api.client.get("/session", headers=cookie_headers(session_id)).status_code == 401


def test_sign_out_needs_the_csrf_token_and_ends_the_session(api: Api) -> None:
    response = sign_in(api, {"email": api.credentials["email"], "password": api.credentials["password"]})
    session_id, _ = session_cookie(response)
    refused = api.client.delete("/session", headers=cookie_headers(session_id))
    assert refused.status_code == 403
    assert api.client.get("/session", headers=cookie_headers(session_id)).status_code == 200

    signed_out = api.client.delete(
        "/session", headers=cookie_headers(session_id, **{"X-CSRF-Token": csrf_token(session_id)})
    )
    assert signed_out.status_code == 200
    cleared = SimpleCookie()
    cleared.load(signed_out.headers["set-cookie"])
    assert cleared["edgeplane_session"]["max-age"] == "0"
    ended = api.call("GET", "/zones", headers=cookie_headers(session_id))
    assert ended.status_code == 401
    assert [error["code"] for error in ended.json()["errors"]] == [10000, 9112]


def test_the_headers_win_over_the_cookie(api: Api) -> None:
    # A v4 client that sends a token is that token, whatever cookie it carries (and needs no CSRF token).
    headers = {**api.token_headers, "Cookie": "edgeplane_session=ended"}
    path = f"/zones/{api.credentials['zone_id']}/web3/hostnames"
    assert api.call("POST", path, headers=headers, json={"name": "gw.localhost", "target": "ethereum"}).json()[
        "success"
    ]


def test_the_dashboard_is_served_at_the_root_with_its_own_origin_only(api: Api) -> None:
    page = api.client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/app.js">' in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    script = api.client.get("/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert api.client.get("/healthz").json() == {"status": "ok"}


def test_a_database_from_before_the_dashboard_keeps_its_users_and_tokens(tmp_path: Path) -> None:
    # SQLite alters a table by copying it where it must; a copy of users would cascade into their tokens.
    database = Database(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006_rule_lists")
        connection.execute(text("INSERT INTO accounts (id, name, created_on) VALUES ('a', 'n', '2026-01-01')"))
        connection.execute(
            text(
                "INSERT INTO users (id, email, account_id, api_key_hash, created_on) "
                "VALUES ('u', 'e@example.com', 'a', 'h', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO api_tokens (id, user_id, name, value_hash, status, policies, issued_on, modified_on) "
                "VALUES ('t', 'u', 'n', 'v', 'active', '[]', '2026-01-01', '2026-01-01')"
            )
        )
    database.migrate()
    with database.engine.begin() as connection:
        assert connection.execute(text("SELECT id, password_hash FROM users")).all() == [("u", None)]
        assert connection.execute(text("SELECT id FROM api_tokens")).all() == [("t",)]
    database.close()
