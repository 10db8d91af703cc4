"""The WAF package's errors. Problems in stored rules are not raised (they are counted and reported by the compiled
firewall); these are for callers' mistakes."""

from __future__ import annotations


class WafError(Exception):
    """Base of the WAF package's errors."""


class UnknownPhaseError(WafError, ValueError):
    """A firewall was asked to compile a phase the engine does not run."""


class RateLimitError(WafError, ValueError):
    """A rate limiting rule's ``ratelimit`` object cannot be accepted. ``code`` is the v4 error code the API answers
    with, ``message`` says why, and ``pointer`` is the JSON pointer of the offending member relative to the
    ``ratelimit`` object (``"/period"``, ``"/characteristics/2"``; ``""`` for the object itself)."""

    def __init__(self, code: int, message: str, pointer: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.pointer = pointer
