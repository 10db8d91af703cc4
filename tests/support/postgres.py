"""A throw-away PostgreSQL server for tests: initdb in a temporary directory, started on loopback and a free port,
stopped and removed at the end. The server refuses to run as root, so it runs as the ``postgres`` system user
(created by the Debian package that ``scripts/bootstrap dev`` installs)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.anvil import free_port


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def _binaries() -> Path:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists():
            return Path(candidate)
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise PostgresUnavailable("PostgreSQL is not installed: run `scripts/bootstrap dev`")


class PostgresServer:
    """One server with a database ``edgeplane``; ``.url`` is its SQLAlchemy URL."""

    def __init__(self) -> None:
        self.bin = _binaries()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="edgeplane-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "edgeplane", "--auth=trust", "-E", "UTF8")
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off",
            "start",
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            probe = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            )
            if probe.returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "edgeplane", "edgeplane"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return self

    @property
    def url(self) -> str:
        return f"postgresql://edgeplane@127.0.0.1:{self.port}/edgeplane"

    def fresh_database(self, name: str) -> str:
        """A new empty database on the server; its URL."""
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "edgeplane", name],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return f"postgresql://edgeplane@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
