"""The command line: version, clear errors for bad settings, first-start credentials and a clean stop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from edgeplane import __version__
from tests.support.edgeplane import EdgeplaneProcess


def edgeplane(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeplane", *args], capture_output=True, text=True, timeout=60, check=False
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


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with EdgeplaneProcess(tmp_path / "one") as running:
        result = edgeplane(
            "serve", "--data-dir", str(tmp_path / "two"), "--edge-port", str(running.edge_port), "--api-port", "0"
        )
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
