"""The one error of the Rules language: an expression that cannot be accepted, and where it goes wrong."""

from __future__ import annotations


class RulesError(Exception):
    """An expression is not valid: ``message`` says why, ``position`` is the 0-based character offset of the problem
    in the expression text (the length of the text when the problem is its end)."""

    def __init__(self, message: str, position: int = 0) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position
