"""Rulesets (the Rulesets API's records) and their stored versions, and the reads the data plane makes of them.

A ruleset belongs to a zone (``zone_id`` set) or to an account (``zone_id`` None); ``account_id`` is always set. Its
``rules`` are the v4 rule objects exactly as the API returns them. Every write stores the whole ruleset again as a
new ``RulesetVersion``, so any version can be read back. Managed rulesets are not stored: they are data files
(``edgeplane.waf.catalogue``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from edgeplane.store.models import Base, utc_now

# Kinds of the entrypoint ruleset of a phase: one per zone (``zone``) and one per account (``root``).
ENTRYPOINT_KINDS = ("zone", "root")


class Ruleset(Base):
    """A zone or account ruleset: an entrypoint (kind ``zone``/``root``) or an account's ``custom`` ruleset."""

    __tablename__ = "rulesets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    zone_id: Mapped[str | None] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(16))
    phase: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer, default=1)
    last_updated: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    rules: Mapped[list[Any]] = mapped_column(default=list)


class RulesetVersion(Base):
    """One stored version of a ruleset: the whole ruleset as it was after a write."""

    __tablename__ = "ruleset_versions"

    ruleset_id: Mapped[str] = mapped_column(ForeignKey("rulesets.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(16))
    phase: Mapped[str] = mapped_column(String(64))
    last_updated: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    rules: Mapped[list[Any]] = mapped_column(default=list)


def find_entrypoint(session: Session, *, zone_id: str | None, account_id: str | None, phase: str) -> Ruleset | None:
    """The entrypoint ruleset of ``phase`` for a zone (``zone_id``) or, when ``zone_id`` is None, for the account;
    None when there is none."""
    query = select(Ruleset).where(Ruleset.phase == phase, Ruleset.kind.in_(ENTRYPOINT_KINDS))
    if zone_id is not None:
        query = query.where(Ruleset.zone_id == zone_id)
    else:
        query = query.where(Ruleset.account_id == account_id, Ruleset.zone_id.is_(None))
    return session.scalars(query).first()


def entrypoint_rules(
    session: Session, *, zone_id: str | None = None, account_id: str | None = None, phase: str
) -> list[dict[str, Any]]:
    """The rules (v4 rule objects) of the zone's entrypoint of ``phase`` when ``zone_id`` is given, else of the
    account's; an empty list when there is no entrypoint. Raises ``ValueError`` when neither id is given."""
    if zone_id is None and account_id is None:
        raise ValueError("entrypoint_rules needs a zone_id or an account_id")
    entrypoint = find_entrypoint(session, zone_id=zone_id, account_id=account_id, phase=phase)
    return list(entrypoint.rules) if entrypoint is not None else []


def account_custom_rulesets(session: Session, account_id: str) -> dict[str, list[dict[str, Any]]]:
    """The rules of every ``custom`` ruleset of the account, by ruleset id: what an account entrypoint's
    ``execute`` rules run."""
    query = select(Ruleset).where(Ruleset.account_id == account_id, Ruleset.zone_id.is_(None), Ruleset.kind == "custom")
    return {ruleset.id: list(ruleset.rules) for ruleset in session.scalars(query).all()}


def record_version(session: Session, ruleset: Ruleset) -> None:
    """Stores ``ruleset`` as it is now as its version ``ruleset.version``, in the caller's transaction."""
    session.add(
        RulesetVersion(
            ruleset_id=ruleset.id,
            version=ruleset.version,
            name=ruleset.name,
            description=ruleset.description,
            kind=ruleset.kind,
            phase=ruleset.phase,
            last_updated=ruleset.last_updated,
            rules=list(ruleset.rules),
        )
    )
