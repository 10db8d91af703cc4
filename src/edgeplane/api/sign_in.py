"""Signing in to the dashboard: ``POST /session`` (an email and password, or an API token), ``GET /session`` (who is
signed in, and the CSRF token the dashboard's pages send with each write) and ``DELETE /session`` (sign out).

These three are outside ``/client/v4``: they open and close the session the dashboard then uses on the v4 API itself
(``edgeplane.api.auth`` takes the session cookie there). They answer v4 envelopes all the same, so the dashboard reads
one kind of answer. Signing in takes only a JSON body (a form another site posts cannot be one without the browser
asking first), and failed attempts are limited per client address (``SignInThrottle``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from edgeplane.api.auth import session_principal
from edgeplane.api.credentials import API_TOKEN_FORMAT, password_hash, password_matches, secret_hash
from edgeplane.api.dashboard_sessions import (
    SESSION_COOKIE,
    SESSION_LIFETIME,
    close_session,
    csrf_token,
    live_session,
    open_session,
)
from edgeplane.api.endpoint import ControlPlane, envelope_response, read_body, refuse_declared_length
from edgeplane.api.errors import ApiError, bad_request
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import ApiToken, User

SIGN_IN_BODY_LIMIT = 16 * 1024
# Past this many clients with recent failures, the throttle forgets those whose failures left the window.
_MAX_CLIENTS_TRACKED = 10_000


@cache
def _nobody_password_hash() -> str:
    """Compared against when the email is unknown, so that an unknown email takes as long to refuse as a wrong
    password. Made at the first sign in, not at import: a hash costs what a guess should."""
    return password_hash("no user has this password")


@dataclass(frozen=True, slots=True)
class GatewayEndpoints:
    """Where the edge serves the web3 gateways, for the dashboard to show each hostname's endpoint URL: the edge
    listener's port and the networks it serves (``/v1/<network>``)."""

    port: int
    networks: tuple[str, ...]


class SignInThrottle:
    """At most ``max_failures`` failed sign-ins per client address in any ``window_seconds``; a client over it is
    refused before its credentials are checked, until its oldest failure leaves the window."""

    def __init__(
        self, *, max_failures: int = 5, window_seconds: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        failures = self._prune(client)
        if len(failures) < self.max_failures:
            return 0.0
        return max(0.0, failures[0] + self.window_seconds - self.clock())

    def record_failure(self, client: str) -> None:
        """Counts a failed sign-in of ``client``."""
        if len(self._failures) > _MAX_CLIENTS_TRACKED:
            for known in list(self._failures):
                self._prune(known)
        self._prune(client)
        self._failures.setdefault(client, deque()).append(self.clock())

    def _prune(self, client: str) -> deque[float]:
        """The failures of ``client`` still in the window; a client without any is forgotten."""
        failures = self._failures.get(client, deque())
        cutoff = self.clock() - self.window_seconds
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            self._failures.pop(client, None)
        return failures


class WrongCredentials(ApiError):
    """HTTP 401: the email and password, or the API token, do not sign anybody in."""


def wrong_password() -> WrongCredentials:
    """401, 10000 then 9113: the same for an unknown email as for a wrong password."""
    return WrongCredentials(
        401, 10000, "Authentication error", extra=[{"code": 9113, "message": "Wrong email or password"}]
    )


def wrong_token() -> WrongCredentials:
    """401, 1000 then 9109: as the v4 API answers an unknown or inactive token."""
    return WrongCredentials(401, 1000, "Invalid API Token", extra=[{"code": 9109, "message": "Invalid API token"}])


def _signed_in(user: User, token_id: str | None, session_id: str, gateway: GatewayEndpoints | None) -> Any:
    """What ``/session`` answers of a session (its end added by the caller)."""
    return {
        "user": {"id": user.id, "email": user.email},
        "account_id": user.account_id,
        "token_id": token_id,
        "csrf_token": csrf_token(session_id),
        "gateway": None if gateway is None else {"port": gateway.port, "networks": list(gateway.networks)},
    }


class SignIn:
    """The ``/session`` routes over the control plane's database."""

    def __init__(
        self, plane: ControlPlane, *, gateway: GatewayEndpoints | None = None, throttle: SignInThrottle | None = None
    ) -> None:
        self.plane = plane
        self.gateway = gateway
        self.throttle = throttle or SignInThrottle()

    def routes(self) -> list[BaseRoute]:
        """``GET``, ``POST`` and ``DELETE /session``."""
        return [
            Route("/session", self.current, methods=["GET"]),
            Route("/session", self.sign_in, methods=["POST"]),
            Route("/session", self.sign_out, methods=["DELETE"]),
        ]

    async def sign_in(self, request: Request) -> Response:
        """Opens a session for an ``{"email", "password"}`` or ``{"token"}`` body and sets its cookie."""
        client = request.client.host if request.client is not None else ""
        try:
            wait = self.throttle.retry_after(client)
            if wait > 0:
                response = _error(ApiError(429, 971, f"Too many failed sign-ins: try again in {int(wait) + 1} seconds"))
                response.headers["retry-after"] = str(int(wait) + 1)
                return response
            if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
                raise bad_request("sign in takes a JSON body (Content-Type: application/json)", code=6003)
            refuse_declared_length(request.headers.get("content-length"), SIGN_IN_BODY_LIMIT)
            body = _credentials_body(await read_body(request, SIGN_IN_BODY_LIMIT))
            result, session_id = await run_in_threadpool(self._open, body)
        except WrongCredentials as error:
            self.throttle.record_failure(client)
            return _error(error)
        except ApiError as error:
            return _error(error)
        response = envelope_response(200, success=True, errors=[], result=result)
        response.set_cookie(
            SESSION_COOKIE,
            session_id,
            max_age=int(SESSION_LIFETIME.total_seconds()),
            path="/",
            secure=True,
            httponly=True,
            samesite="strict",
        )
        return response

    async def current(self, request: Request) -> Response:
        """Who the session cookie signs in, with the session's CSRF token; 401 without a live session."""
        session_id = request.cookies.get(SESSION_COOKIE)
        try:
            if not session_id:
                raise ApiError(401, 10000, "Authentication error", extra=[{"code": 9112, "message": "Not signed in"}])
            result = await run_in_threadpool(self._current, session_id, request)
        except ApiError as error:
            return _error(error)
        return envelope_response(200, success=True, errors=[], result=result)

    async def sign_out(self, request: Request) -> Response:
        """Ends the session (its CSRF token required while it is live) and clears its cookie."""
        session_id = request.cookies.get(SESSION_COOKIE)
        try:
            if session_id:
                await run_in_threadpool(self._close, session_id, request)
        except ApiError as error:
            return _error(error)
        response = envelope_response(200, success=True, errors=[], result={"signed_out": True})
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="strict")
        return response

    def _open(self, body: dict[str, str]) -> tuple[Any, str]:
        with self.plane.database.session() as session:
            if "token" in body:
                user, token_id = self._token_user(session, body["token"])
            else:
                user, token_id = self._password_user(session, body["email"], body["password"]), None
            opened = open_session(session, user_id=user.id, token_id=token_id)
            result = _signed_in(user, token_id, opened.session_id, self.gateway)
            result["expires_on"] = rfc3339(opened.expires_on)
            return result, opened.session_id

    @staticmethod
    def _password_user(session: Session, email: str, password: str) -> User:
        user = session.scalars(select(User).where(User.email == email.strip().lower())).first()
        stored = user.password_hash if user is not None and user.password_hash else _nobody_password_hash()
        if not password_matches(password, stored) or user is None or not user.password_hash:
            raise wrong_password()
        return user

    @staticmethod
    def _token_user(session: Session, token: str) -> tuple[User, str]:
        if not API_TOKEN_FORMAT.fullmatch(token):
            raise wrong_token()
        record = session.scalars(select(ApiToken).where(ApiToken.value_hash == secret_hash(token))).first()
        if record is None or record.status != "active":
            raise wrong_token()
        user = session.get(User, record.user_id)
        if user is None:
            raise wrong_token()
        return user, record.id

    def _current(self, session_id: str, request: Request) -> Any:
        with self.plane.database.session() as session:
            principal = session_principal(session_id, request.method, request.headers, session)
            record = live_session(session, session_id)
            user = session.get(User, principal.user_id)
            if record is None or user is None:
                raise ApiError(401, 10000, "Authentication error")
            result = _signed_in(user, principal.token_id, session_id, self.gateway)
            result["expires_on"] = rfc3339(record.expires_on)
            return result

    def _close(self, session_id: str, request: Request) -> None:
        with self.plane.database.session() as session:
            if live_session(session, session_id) is None:
                return
            session_principal(session_id, request.method, request.headers, session)  # the CSRF token is required
            close_session(session, session_id)


def _credentials_body(raw: bytes) -> dict[str, str]:
    """The sign-in body: exactly ``email`` and ``password``, or exactly ``token``, all strings."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("Malformed JSON in request body", code=6007) from None
    if not isinstance(body, dict) or not all(isinstance(value, str) for value in body.values()):
        raise bad_request("the body must be a JSON object of strings", code=6007)
    if set(body) == {"email", "password"} or set(body) == {"token"}:
        return body
    raise bad_request("sign in with email and password, or with token", code=6007)


def _error(error: ApiError) -> Response:
    return envelope_response(error.status, success=False, errors=error.errors, result=None)
