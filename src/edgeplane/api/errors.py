"""The control plane's errors: each has the v4 error code, a message, and the HTTP status it is answered with.
They become v4 envelopes with ``success: false`` in one place (``edgeplane.api.endpoint``)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A v4 API failure. ``errors`` may hold more than one ``{code, message}`` entry (and a ``source`` pointer)."""

    def __init__(self, status: int, code: int, message: str, *, extra: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errors: list[dict[str, Any]] = [{"code": code, "message": message}, *(extra or [])]


def bad_request(message: str, *, code: int = 1001, pointer: str | None = None) -> ApiError:
    """HTTP 400 for a request the API cannot accept; ``pointer`` names the member (``/filter``)."""
    error = ApiError(400, code, message)
    if pointer is not None:
        error.errors[0]["source"] = {"pointer": pointer}
    return error


def not_found(path: str) -> ApiError:
    """HTTP 404 for an object that does not exist or that the caller may not see (never 403 for those)."""
    return ApiError(404, 7003, f"Could not route to {path}, perhaps your object identifier is invalid?")


def authentication_error(status: int = 401) -> ApiError:
    """The generic authentication failure."""
    return ApiError(status, 10000, "Authentication error")


def conflict(message: str, *, code: int = 1002) -> ApiError:
    """HTTP 409: the request clashes with what exists."""
    return ApiError(409, code, message)
