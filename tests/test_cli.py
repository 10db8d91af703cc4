"""The command line: version, clear errors for bad settings, first-start credentials and a clean stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeplane import __version__
from edgeplane.app import browsable_url
from edgeplane.listeners import bind_listener, join_listener
from tests.support.edgeplane import EdgeplaneProcess


def edgeplane(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeplane", *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )


def test_version() -> None:
    assert edgeplane("--version").stdout.strip() == f"edgeplane {__version__}"
    assert edgeplane("version").stdout.strip() == f"edgeplane {__version__}"


def test_bad_flags_exit_2_with_a_readable_message(tmp_path: Path) -> None:
    result = edgeplane("serve", "--data-dir", str(tmp_path), "--upstream", "mainnet")
    assert result.returncode == 2
    assert "--upstream takes NETWORK=URL" in result.stderr
    assert "Traceback" not in result.stderr
    result = edgeplane("serve", "--data-dir", str(tmp_path), "--config", str(tmp_path / "missing.toml"))
    assert result.returncode == 2
    assert "config file not found" in result.stderr


def test_first_start_writes_credentials_once_and_stops_cleanly(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    process = EdgeplaneProcess(data_dir).start()
    first = json.loads((data_dir / "credentials.json").read_text())
    assert process.stop() == 0
    process = EdgeplaneProcess(data_dir).start()
    assert json.loads((data_dir / "credentials.json").read_text()) == first
    assert process.stop() == 0
    full_log = process.log_path.read_text()
    assert "created the bootstrap account" in full_log
    assert first["api_token"] not in full_log
    assert first["api_key"] not in full_log
    assert first["password"] not in full_log


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    # The port held as a running edgeplane with two edge workers holds it (SO_REUSEPORT, which a second edgeplane
    # of the same user could join): the sockets alone, not a whole service, whose start is all this would wait for.
    with bind_listener("127.0.0.1", 0, share_port=True) as held, join_listener(held):
        port = held.getsockname()[1]
        result = edgeplane("serve", "--data-dir", str(tmp_path / "two"), "--edge-port", str(port), "--api-port", "0")
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_configuration_database_that_cannot_be_opened_stops_serve_at_start(tmp_path: Path) -> None:
    # Checked by the supervisor before any child starts: an exit with a message, not a crash loop of children.
    env = {name: value for name, value in os.environ.items() if not name.startswith("EDGEPLANE_")}
    env["EDGEPLANE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'no such directory' / 'edgeplane.db'}"
    result = edgeplane("serve", "--data-dir", str(tmp_path / "data"), "--edge-port", "0", "--api-port", "0", env=env)
    assert result.returncode == 1
    assert "edgeplane: cannot open the configuration database" in result.stderr
    assert "Traceback" not in result.stderr
    assert "started a child process" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8788/"),
        ("0.0.0.0", "http://127.0.0.1:8788/"),
        ("::", "http://[::1]:8788/"),
        ("::1", "http://[::1]:8788/"),
        ("edge.example", "http://edge.example:8788/"),
    ],
)
def test_the_dashboards_url_is_one_a_browser_opens(host: str, url: str) -> None:
    assert browsable_url(host, 8788) == url
