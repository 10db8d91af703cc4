"""Configuration state: SQLAlchemy models, the reads and writes made of them, and Alembic migrations. Persistence
only: what is built from it (the data plane's snapshot) is ``edgeplane.configuration``'s."""
