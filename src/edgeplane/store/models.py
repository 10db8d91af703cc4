"""The control plane's records. Secrets (API keys, token values) are stored only as hashes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """The declarative base of every model."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Account(Base):
    """An account: the owner of zones, tokens and account-level jobs."""

    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class User(Base):
    """A user, with the hash of its global API key; a member of one account."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    email: Mapped[str] = mapped_column(String(255), unique=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    api_key_hash: Mapped[str] = mapped_column(String(64))
    # The dashboard's sign in (``edgeplane.api.credentials.password_hash``); None: the user signs in with a token.
    password_hash: Mapped[str | None] = mapped_column(String(255))
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class ApiToken(Base):
    """An API token: the hash of its value, and policies naming what it may reach."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    value_hash: Mapped[str] = mapped_column(String(64), unique=True)
    status: Mapped[str] = mapped_column(String(16), default="active")
    policies: Mapped[list[Any]] = mapped_column(JSON, default=list)
    issued_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class DashboardSession(Base):
    """A signed-in dashboard session: the hash of its cookie's value, whose user (and, signed in with an API token,
    which token: the session may then do what the token may), and when it ends."""

    __tablename__ = "dashboard_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_id: Mapped[str | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True)
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    expires_on: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Zone(Base):
    """A zone: a domain of an account."""

    __tablename__ = "zones"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    plan: Mapped[str] = mapped_column(String(16), default="free")
    status: Mapped[str] = mapped_column(String(16), default="active")
    type: Mapped[str] = mapped_column(String(16), default="full")
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class Web3Hostname(Base):
    """A hostname of a zone that serves a web3 gateway (target ``ethereum``)."""

    __tablename__ = "web3_hostnames"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    target: Mapped[str] = mapped_column(String(32))
    description: Mapped[str] = mapped_column(Text, default="")
    dnslink: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class LogpushJob(Base):
    """A Logpush job of a zone or an account (exactly one of the two)."""

    __tablename__ = "logpush_jobs"
    # Ids only grow: SQLite's AUTOINCREMENT never gives a deleted job's id again (PostgreSQL's sequence never does).
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    zone_id: Mapped[str | None] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    account_id: Mapped[str | None] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    dataset: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(512), default="")
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    destination_conf: Mapped[str] = mapped_column(String(4096))
    logpull_options: Mapped[str | None] = mapped_column(Text)
    output_options: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    filter: Mapped[str | None] = mapped_column(Text)
    frequency: Mapped[str] = mapped_column(String(8), default="high")
    kind: Mapped[str] = mapped_column(String(8), default="")
    max_upload_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    max_upload_records: Mapped[int] = mapped_column(Integer, default=100_000)
    max_upload_interval_seconds: Mapped[int] = mapped_column(Integer, default=30)
    last_complete: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error_message: Mapped[str | None] = mapped_column(Text)
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class RuleList(Base):
    """An account's list (``/accounts/{account_id}/rules/lists``): a named set of items of one ``kind`` (``ip``,
    ``hostname``, ``asn`` or ``redirect``). The name is unique in the account: expressions would name it."""

    __tablename__ = "rule_lists"
    __table_args__ = (UniqueConstraint("account_id", "name", name="uq_rule_lists_account_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(50))
    kind: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text, default="")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class RuleListItem(Base):
    """One item of a list. ``key`` is the item's identity in its list (the canonical address or network, the
    hostname, the ASN, a redirect's source URL): unique per list, the order of listing and the cursor's position.
    ``content`` is the kind's member as the API shows it (``{"ip": ...}``, ``{"hostname": {...}}``...)."""

    __tablename__ = "rule_list_items"
    __table_args__ = (UniqueConstraint("list_id", "key", name="uq_rule_list_items_list_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    list_id: Mapped[str] = mapped_column(ForeignKey("rule_lists.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(2048))
    content: Mapped[dict[str, Any]] = mapped_column(JSON)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class RuleListOperation(Base):
    """A bulk operation on a list's items, as ``GET .../rules/lists/bulk_operations/{id}`` reports it. edgeplane
    applies the items in the request that asks for them, so an operation is recorded already ``completed``.
    ``list_id`` is kept without a foreign key: the operation stays readable after its list is deleted."""

    __tablename__ = "rule_list_operations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    list_id: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    completed: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ConfigVersion(Base):
    """One row: bumped by every configuration change, so data-plane processes know to rebuild their snapshot."""

    __tablename__ = "config_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, default=0)
