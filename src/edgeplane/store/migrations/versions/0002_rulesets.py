"""Rulesets of zones and accounts, and their stored versions."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_rulesets"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rulesets",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), nullable=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
    )
    op.create_index("ix_rulesets_account_id", "rulesets", ["account_id"])
    op.create_index("ix_rulesets_zone_id", "rulesets", ["zone_id"])
    op.create_table(
        "ruleset_versions",
        sa.Column("ruleset_id", sa.String(32), sa.ForeignKey("rulesets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("phase", sa.String(64), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ruleset_versions")
    op.drop_table("rulesets")
