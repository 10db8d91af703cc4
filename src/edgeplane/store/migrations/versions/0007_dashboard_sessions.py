"""The dashboard's sign in: the hash of a user's password, and the dashboard's sessions (kept by the hash of their
id, never the id itself)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_dashboard_sessions"
down_revision = "0006_rule_lists"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as users:
        users.add_column(sa.Column("password_hash", sa.String(255), nullable=True))
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("token_id", sa.String(32), sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=True),
        sa.Column("created_on", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_on", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_dashboard_sessions_user_id", "dashboard_sessions", ["user_id"])
    op.create_index("ix_dashboard_sessions_token_id", "dashboard_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_table("dashboard_sessions")
    with op.batch_alter_table("users") as users:
        users.drop_column("password_hash")
