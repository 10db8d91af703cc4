"""The previous managed WAF of each zone and its migration state, URI-based WAF overrides, firewall rules and page
rules."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003_previous_waf"
down_revision = "0002_rulesets"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _zone() -> sa.Column[Any]:
    return sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "previous_waf",
        sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("setting", sa.String(8), nullable=False),
        _when("setting_modified_on", nullable=True),
        sa.Column("owasp_sensitivity", sa.String(8), nullable=True),
        sa.Column("owasp_action_mode", sa.String(16), nullable=False),
        sa.Column("group_modes", sa.JSON(), nullable=False),
        sa.Column("rule_modes", sa.JSON(), nullable=False),
        sa.Column("migration_state", sa.String(16), nullable=False),
        _when("migration_modified_on", nullable=True),
        sa.Column("migration_source", sa.String(16), nullable=True),
    )
    op.create_table(
        "waf_overrides",
        sa.Column("id", sa.String(32), primary_key=True),
        _zone(),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("urls", sa.JSON(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("rewrite_action", sa.JSON(), nullable=False),
        _when("created_on"),
        _when("modified_on"),
    )
    op.create_index("ix_waf_overrides_zone_id", "waf_overrides", ["zone_id"])
    op.create_table(
        "firewall_rules",
        sa.Column("id", sa.String(32), primary_key=True),
        _zone(),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("products", sa.JSON(), nullable=False),
        sa.Column("ref", sa.String(50), nullable=False),
        sa.Column("filter_id", sa.String(32), nullable=False),
        sa.Column("filter_expression", sa.Text(), nullable=False),
        sa.Column("filter_paused", sa.Boolean(), nullable=False),
        sa.Column("filter_description", sa.Text(), nullable=False),
        _when("created_on"),
        _when("modified_on"),
    )
    op.create_index("ix_firewall_rules_zone_id", "firewall_rules", ["zone_id"])
    op.create_table(
        "page_rules",
        sa.Column("id", sa.String(32), primary_key=True),
        _zone(),
        sa.Column("targets", sa.JSON(), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _when("created_on"),
        _when("modified_on"),
    )
    op.create_index("ix_page_rules_zone_id", "page_rules", ["zone_id"])


def downgrade() -> None:
    op.drop_table("page_rules")
    op.drop_table("firewall_rules")
    op.drop_table("waf_overrides")
    op.drop_table("previous_waf")
