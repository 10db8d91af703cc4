"""The Rules language (wirefilter syntax): parse, type-check and compile expressions over HTTP request fields.

PLACEHOLDER: the public interface is being written; see the helper brief. Everything below is replaced.
"""

from __future__ import annotations

from typing import Any


class RulesError(Exception):
    """An expression is not valid: ``position`` is the 0-based character offset, ``message`` the problem."""

    def __init__(self, message: str, position: int = 0) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position


def check_expression(text: str) -> None:
    """Raises ``RulesError`` if ``text`` is not a valid expression. (Placeholder: accepts any non-empty text.)"""
    if not text.strip():
        raise RulesError("empty expression")


def compile_expression(text: str) -> Any:
    """Placeholder."""
    raise NotImplementedError
