"""The configuration channel: a Unix stream socket in the data directory (``run/config.sock``) that ``edgeplane
serve`` binds and keeps open, the API accepts on, and every follower connects to; and the messages on it, one JSON
object a line.

A follower says who it is when it connects (``{"hello": {"role": ..., "pid": ..., "worker": ..., "version": ...}}``)
and which version it has applied whenever that changes (``{"applied": N}``); the API announces each new version
(``{"version": N}``). Since the supervisor holds the listening socket, a follower that connects while the API
restarts waits in its backlog rather than being refused.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

# The longest path a Unix socket address holds on Linux (108 bytes with the terminating zero).
_MAX_SOCKET_PATH = 107

Role = Literal["edge", "delivery"]
ROLES: tuple[Role, ...] = ("edge", "delivery")


class ChannelError(ValueError):
    """A line on the channel that is not a message of its protocol."""


def channel_path(data_dir: Path) -> Path:
    """Where the configuration channel's socket is, for the service on ``data_dir``."""
    return data_dir / "run" / "config.sock"


def followed_channel(data_dir: Path, role: str) -> Path | None:
    """The channel the followers of a node with ``role`` listen on: the API's, where the node runs the API (the roles
    ``all`` and ``api``); None elsewhere, where they follow the configuration through the database alone."""
    return channel_path(data_dir) if role in ("all", "api") else None


@contextmanager
def _address(path: Path) -> Iterator[str]:
    """An address for ``path`` that fits a socket address: the path itself, or for a longer one, the path through
    an open descriptor of its directory (``/proc/self/fd/N/name``)."""
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def bind_channel(path: Path) -> socket.socket:
    """The listening socket of the channel at ``path`` (a socket left there by an earlier run is replaced), usable by
    this user only. Raises ``OSError`` when it cannot be bound."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            sock.bind(address)
        os.chmod(path, 0o600)
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def connect_channel(path: Path) -> socket.socket:
    """A non-blocking socket connected to the channel at ``path``. Raises ``OSError`` when nothing listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            sock.connect(address)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


@dataclass(frozen=True, slots=True)
class Hello:
    """A follower's first message: who it is and the version it has applied."""

    role: Role
    pid: int
    worker: int | None
    version: int


@dataclass(frozen=True, slots=True)
class Applied:
    """A follower has applied this configuration version (or a later one)."""

    version: int


@dataclass(frozen=True, slots=True)
class Announce:
    """The API committed this configuration version."""

    version: int


Message = Hello | Applied | Announce


def encode(message: Message) -> bytes:
    """The line that carries ``message``."""
    if isinstance(message, Hello):
        body: dict[str, object] = {
            "hello": {"role": message.role, "pid": message.pid, "worker": message.worker, "version": message.version}
        }
    elif isinstance(message, Applied):
        body = {"applied": message.version}
    else:
        body = {"version": message.version}
    return orjson.dumps(body) + b"\n"


def decode(line: bytes) -> Message:
    """The message a line carries. Raises ``ChannelError`` for anything else."""
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ChannelError("a channel line is not JSON") from None
    if not isinstance(body, dict) or len(body) != 1:
        raise ChannelError("a channel message is an object with one member")
    (kind, value), *_ = body.items()
    if kind == "applied":
        return Applied(_version(value))
    if kind == "version":
        return Announce(_version(value))
    if kind == "hello" and isinstance(value, dict):
        role, pid, worker = value.get("role"), value.get("pid"), value.get("worker")
        if role not in ROLES:
            raise ChannelError(f"unknown follower role {role!r}")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ChannelError("a hello's pid is a positive integer")
        if worker is not None and (not isinstance(worker, int) or isinstance(worker, bool) or worker < 0):
            raise ChannelError("a hello's worker is a number or null")
        return Hello(role=role, pid=pid, worker=worker, version=_version(value.get("version")))
    raise ChannelError(f"unknown channel message {kind!r}")


def _version(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ChannelError("a configuration version is a non-negative integer")
    return value
