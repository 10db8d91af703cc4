"""The filters firewall rules reference (``firewall_filters``): one is made for each filter the existing firewall
rules carry inline."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005_firewall_filters"
down_revision = "0004_logpush_job_ids"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "firewall_filters",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), nullable=False),
        sa.Column("expression", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("ref", sa.String(50), nullable=False),
        _when("created_on"),
    )
    op.create_index("ix_firewall_filters_zone_id", "firewall_filters", ["zone_id"])
    # Firewall rules stored their filter inline: each filter id becomes a filter (the first rule's copy of it).
    op.execute(
        "INSERT INTO firewall_filters (id, zone_id, expression, paused, description, ref, created_on) "
        "SELECT rule.filter_id, rule.zone_id, rule.filter_expression, rule.filter_paused, rule.filter_description, "
        "'', rule.created_on FROM firewall_rules AS rule "
        "WHERE rule.id = (SELECT MIN(other.id) FROM firewall_rules AS other WHERE other.filter_id = rule.filter_id)"
    )


def downgrade() -> None:
    op.drop_table("firewall_filters")
