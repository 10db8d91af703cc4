"""The WAF package's errors. Problems in stored rules are not raised (they are counted and reported by the compiled
firewall); these are for callers' mistakes."""

from __future__ import annotations


class WafError(Exception):
    """Base of the WAF package's errors."""


class UnknownPhaseError(WafError, ValueError):
    """A firewall was asked to compile a phase the engine does not run."""
