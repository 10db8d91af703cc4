"""``python -m edgeplane``."""

from edgeplane.cli import app

app()
