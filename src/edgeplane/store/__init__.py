"""Configuration state: SQLAlchemy models, Alembic migrations, and the snapshot the data plane works from."""
