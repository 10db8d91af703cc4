"""Logpush job ids only grow: on SQLite the table is rebuilt with ``AUTOINCREMENT``, so the id of a deleted job
(even the highest) is never given again; SQLite keeps the highest id ever used in ``sqlite_sequence``. PostgreSQL's
identity sequence never gives a number twice already."""

from __future__ import annotations

from alembic import op

revision = "0004_logpush_job_ids"
down_revision = "0003_previous_waf"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # The rebuilt table's sequence starts at the highest id of the jobs copied into it.
    with op.batch_alter_table("logpush_jobs", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
        pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("logpush_jobs", recreate="always", table_kwargs={"sqlite_autoincrement": False}):
        pass
