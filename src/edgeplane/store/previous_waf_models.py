"""Records of the previous (package-based) managed WAF of a zone and of the zone's migration to the ruleset-based
WAF: the zone's WAF setting and package configuration, URI-based WAF overrides, firewall rules and page rules.

A zone without a ``previous_waf`` row has the previous version in its defaults (setting ``off``, migration state
``start``); the row is written on the first change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from edgeplane.store.models import Base, utc_now


class PreviousWaf(Base):
    """One zone's previous managed WAF: its on/off setting, the packages' configuration and the migration state.

    ``group_modes`` and ``rule_modes`` hold only what the user changed (previous group or rule id → mode);
    ``owasp_sensitivity`` None means the package's default, never set by the user.
    """

    __tablename__ = "previous_waf"

    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), primary_key=True)
    setting: Mapped[str] = mapped_column(String(8), default="off")
    setting_modified_on: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    owasp_sensitivity: Mapped[str | None] = mapped_column(String(8))
    owasp_action_mode: Mapped[str] = mapped_column(String(16), default="challenge")
    group_modes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    rule_modes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    migration_state: Mapped[str] = mapped_column(String(16), default="start")
    migration_modified_on: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    migration_source: Mapped[str | None] = mapped_column(String(16))


class WafOverride(Base):
    """A URI-based WAF override: for requests to ``urls``, other group modes, rule modes or rewritten actions."""

    __tablename__ = "waf_overrides"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    urls: Mapped[list[Any]] = mapped_column(JSON, default=list)
    priority: Mapped[int] = mapped_column(Integer, default=1)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    groups: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    rules: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    rewrite_action: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class FirewallRule(Base):
    """A firewall rule of the previous firewall, with its filter (kept inline: one filter per rule here)."""

    __tablename__ = "firewall_rules"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    action: Mapped[str] = mapped_column(String(32))
    priority: Mapped[int | None] = mapped_column(Integer)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    products: Mapped[list[Any]] = mapped_column(JSON, default=list)
    ref: Mapped[str] = mapped_column(String(50), default="")
    filter_id: Mapped[str] = mapped_column(String(32))
    filter_expression: Mapped[str] = mapped_column(Text)
    filter_paused: Mapped[bool] = mapped_column(Boolean, default=False)
    filter_description: Mapped[str] = mapped_column(Text, default="")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class PageRule(Base):
    """A page rule: URL targets and the settings applied to matching requests."""

    __tablename__ = "page_rules"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    targets: Mapped[list[Any]] = mapped_column(JSON, default=list)
    actions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    priority: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(16), default="disabled")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    modified_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class FirewallFilter(Base):
    """A filter of a zone (``/zones/{zone_id}/filters``): a Rules-language expression that firewall rules reference
    by id. Each firewall rule keeps a copy of its filter's members (``filter_*``), which a change of the filter
    rewrites, so what reads firewall rules needs no join."""

    __tablename__ = "firewall_filters"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    zone_id: Mapped[str] = mapped_column(ForeignKey("zones.id", ondelete="CASCADE"), index=True)
    expression: Mapped[str] = mapped_column(Text)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(Text, default="")
    ref: Mapped[str] = mapped_column(String(50), default="")
    created_on: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
