"""Account lists (``/accounts/{account_id}/rules/lists``): the lists, their items, and the bulk operations that
changed the items."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006_rule_lists"
down_revision = "0005_firewall_filters"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "rule_lists",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        _when("created_on"),
        _when("modified_on"),
        sa.UniqueConstraint("account_id", "name", name="uq_rule_lists_account_name"),
    )
    op.create_index("ix_rule_lists_account_id", "rule_lists", ["account_id"])
    op.create_table(
        "rule_list_items",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("list_id", sa.String(32), sa.ForeignKey("rule_lists.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key", sa.String(2048), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        _when("created_on"),
        _when("modified_on"),
        sa.UniqueConstraint("list_id", "key", name="uq_rule_list_items_list_key"),
    )
    op.create_index("ix_rule_list_items_list_id", "rule_list_items", ["list_id"])
    op.create_table(
        "rule_list_operations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("list_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _when("completed", nullable=True),
    )
    op.create_index("ix_rule_list_operations_account_id", "rule_list_operations", ["account_id"])


def downgrade() -> None:
    op.drop_table("rule_list_operations")
    op.drop_table("rule_list_items")
    op.drop_table("rule_lists")
