"""Fixtures shared by the suite: the configuration database, on SQLite and on a real PostgreSQL server the suite
starts itself (once per test process). A directory or module that needs another database defines its own.

And what holds for every test: the suite does not pass without its real parts (a skip whose reason names one, the
Core Rule Set, libmodsecurity, chromium, Playwright, PostgreSQL, NATS, SeaweedFS or anvil, is a failure; a skip is
left for a subject absent on purpose, and the summary counts them), and hypothesis has no deadline (a stalled machine
is not a failing property).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Generator, Iterator
from itertools import count
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from edgeplane.store.database import Database, default_database_url
from tests.support.postgres import PostgresServer

_databases = count()

_Report = pytest.TestReport | pytest.CollectReport

settings.register_profile("edgeplane", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("edgeplane")

# The real parts as the reasons of the skips that find them missing name them (scripts/bootstrap dev installs each).
_REAL_PARTS = re.compile(
    r"modsecurity-crs|OWASP Core Rule Set|libmodsecurity|chromium|Playwright|PostgreSQL|nats-server|NATS|SeaweedFS"
    r"|\bweed\b|\banvil\b",
    re.IGNORECASE,
)


def _skip_reason(report: _Report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _fail_a_missing_part(report: _Report) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if _REAL_PARTS.search(reason):
            report.outcome = "failed"
            report.longrepr = f"a real part of the suite is missing, and the suite does not pass without it: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, _Report, _Report]:
    report = yield
    _fail_a_missing_part(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, _Report, _Report]:
    report = yield
    _fail_a_missing_part(report)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many tests were skipped, and why: each reason must be a subject absent on purpose."""
    skipped = terminalreporter.stats.get("skipped", [])
    terminalreporter.section(f"{len(skipped)} skipped")
    for reason, times in sorted(Counter(_skip_reason(report) for report in skipped).items()):
        terminalreporter.write_line(f"{times:5d}  {reason}")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated database, once on each."""
    if request.param == "sqlite":
        url = default_database_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres").fresh_database(f"test_{next(_databases)}")
    database = Database(url)
    database.migrate()
    yield database
    database.close()
