"""The error hierarchy of ``edgeplane.logs``.

Every error names what is wrong in words a client can act on. They are mapped to the v4 envelope in exactly one
place, by the API; nothing here knows about HTTP.
"""

from __future__ import annotations


class LogsError(Exception):
    """A Logpush input that cannot be accepted; ``str()`` is the message to show the client."""


class UnknownDatasetError(LogsError):
    """A dataset name that edgeplane does not have."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown dataset {name!r}")


class FilterError(LogsError):
    """A filter that is not valid JSON, not of the filter language's shape, or not valid for the dataset.

    ``path`` names the offending part of the filter the way a reader of the JSON would (``where.and[2].operator``);
    it is ``""`` when the error concerns the filter as a whole (its size, its JSON syntax, the number of operators).
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class OutputOptionsError(LogsError):
    """``logpull_options`` or ``output_options`` that cannot be accepted; ``member`` names the offending member."""

    def __init__(self, member: str, message: str) -> None:
        self.member = member
        self.message = message
        super().__init__(f"{member}: {message}")


class DestinationError(LogsError):
    """A ``destination_conf`` that is malformed, unsupported or refused."""
