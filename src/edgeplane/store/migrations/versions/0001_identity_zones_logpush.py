"""Accounts, users, API tokens, zones, web3 hostnames, Logpush jobs and the configuration version."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        _when("created_on"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("email", sa.String(255), nullable=False, unique=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("api_key_hash", sa.String(64), nullable=False),
        _when("created_on"),
    )
    op.create_index("ix_users_account_id", "users", ["account_id"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("value_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("policies", sa.JSON(), nullable=False),
        _when("issued_on"),
        _when("modified_on"),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_table(
        "zones",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(253), nullable=False, unique=True),
        sa.Column("plan", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        _when("created_on"),
        _when("modified_on"),
    )
    op.create_index("ix_zones_account_id", "zones", ["account_id"])
    op.create_table(
        "web3_hostnames",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(253), nullable=False, unique=True),
        sa.Column("target", sa.String(32), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("dnslink", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _when("created_on"),
        _when("modified_on"),
    )
    op.create_index("ix_web3_hostnames_zone_id", "web3_hostnames", ["zone_id"])
    op.create_table(
        "logpush_jobs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("zone_id", sa.String(32), sa.ForeignKey("zones.id", ondelete="CASCADE"), nullable=True),
        sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=True),
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("destination_conf", sa.String(4096), nullable=False),
        sa.Column("logpull_options", sa.Text(), nullable=True),
        sa.Column("output_options", sa.JSON(), nullable=True),
        sa.Column("filter", sa.Text(), nullable=True),
        sa.Column("frequency", sa.String(8), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("max_upload_bytes", sa.BigInteger(), nullable=False),
        sa.Column("max_upload_records", sa.Integer(), nullable=False),
        sa.Column("max_upload_interval_seconds", sa.Integer(), nullable=False),
        _when("last_complete", nullable=True),
        _when("last_error", nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        _when("created_on"),
    )
    op.create_index("ix_logpush_jobs_zone_id", "logpush_jobs", ["zone_id"])
    op.create_index("ix_logpush_jobs_account_id", "logpush_jobs", ["account_id"])
    op.create_table(
        "config_version",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    for table in ("config_version", "logpush_jobs", "web3_hostnames", "zones", "api_tokens", "users", "accounts"):
        op.drop_table(table)
