"""The supervisor: ``edgeplane serve`` binds the listeners of its node's role, prepares the configuration database and
the development chain, and runs the parts of the role as child processes, started again when they die, until a
signal: with the role ``all`` (one machine, the default) every edge worker, the API and the Logpush delivery;
``edge``, ``api`` and ``delivery`` are the parts of a cluster (docs/scale.md). It serves no traffic itself: a crash
or an exhaustion of the API (or of an edge worker) takes only that child, and connections made while a child
restarts wait in the backlog of the listening socket this process keeps open. Beside supervising, it answers the
node's health and readiness (``--ops-port``, ``edgeplane.node_checks``) and, in a cluster, records the node's
heartbeat in the register of nodes."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import sys
from pathlib import Path

import structlog
from sqlalchemy.exc import SQLAlchemyError

from edgeplane import __version__
from edgeplane.api.install_secret import ensure_install_secret
from edgeplane.bootstrap import BOOTSTRAP_EMAIL, ensure_bootstrap
from edgeplane.chain.process import ChainProcess
from edgeplane.child_process import ChildProcess, begin_shutdown
from edgeplane.config import NetworkSettings, Settings, UpstreamSettings
from edgeplane.edge.runtime import open_client_locator
from edgeplane.listeners import asgi_server, bind_listener, join_listener
from edgeplane.node_checks import NodeChecks, bus_check, children_check, database_check, node_checks_app
from edgeplane.propagation.channel import bind_channel, channel_path
from edgeplane.rate_counters import RateCounters
from edgeplane.store.cluster_nodes import HEARTBEAT_SECONDS, NodeDescription, forget_node, record_heartbeat
from edgeplane.store.database import Database, default_database_url
from edgeplane.waf.catalogue import use_crs_rules_dir
from edgeplane.waf.core_ruleset import crs_installed

log = structlog.get_logger(__name__)


class DatabaseUnavailable(OSError):
    """The configuration database could not be opened or migrated."""


def _with_dev_chain(settings: Settings, chain: ChainProcess | None) -> Settings:
    """The settings with the development chain as the upstream of every network that has none."""
    if chain is None:
        return settings
    networks = dict(settings.networks)
    for name in chain.networks:
        node = UpstreamSettings(url=chain.url(name), name="devchain", trace_filter="native")
        networks[name] = NetworkSettings(upstreams=[node])
    return settings.model_copy(update={"networks": networks})


def _settings_file(settings: Settings, edge_settings: Settings) -> Path:
    """The resolved settings for the children, readable by this user only (they may name a database password)."""
    run_dir = settings.data_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "resolved-settings.json"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # a file left by an older release may have been readable by others
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(edge_settings.model_dump_json())
    return path


def _child_command(command: str, settings_file: Path, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "edgeplane", command, "--settings-file", str(settings_file), *arguments]


def _child_environment(database_url: str) -> dict[str, str]:
    """The children's environment: the database URL goes there, not on their command lines, which every local user
    can read (``/proc/<pid>/cmdline``), since it may hold a password."""
    return {**os.environ, "EDGEPLANE_DATABASE_URL": database_url}


def _log_child(settings: Settings, settings_file: Path, database_url: str) -> ChildProcess | None:
    """The process of this node's request logs: with the role ``all``, the Logpush delivery process, which also takes
    the edge workers' journals (into the log store, or to the bus when there is one); ``edge``: the intake alone,
    publishing the journals to the bus; ``delivery``: Logpush delivery alone, from the bus; ``api``: none."""
    intake = settings.role in ("all", "edge")
    deliver = settings.role in ("all", "delivery")
    if not (intake or deliver):
        return None
    arguments = ["--workers", str(settings.edge_worker_count)]
    arguments += ["--intake" if intake else "--no-intake", "--deliver" if deliver else "--no-deliver"]
    command = _child_command("delivery", settings_file, *arguments)
    return ChildProcess(
        "delivery" if deliver else "log-intake", lambda _first: command, env=_child_environment(database_url)
    )


def _listening_child(
    name: str,
    command: list[str],
    sock: socket.socket,
    database_url: str,
    *,
    channel: socket.socket | None = None,
    counters: RateCounters | None = None,
) -> ChildProcess:
    """A child serving ``sock``, which it inherits as ``--fd`` (and ``channel``, the configuration channel's socket,
    as ``--channel-fd``; ``counters``, the node's rate counters, as ``--rate-counters-fd``); this process keeps its
    copies open, so that connections made while the child restarts wait for it rather than being refused, and a
    restarted edge worker counts on where it left off."""
    inherited = [sock] if channel is None else [sock, channel]
    for each in inherited:
        each.set_inheritable(True)
    arguments = [*command, "--fd", str(sock.fileno())]
    passed = [each.fileno() for each in inherited]
    if channel is not None:
        arguments += ["--channel-fd", str(channel.fileno())]
    if counters is not None:
        os.set_inheritable(counters.fd, True)
        arguments += ["--rate-counters-fd", str(counters.fd)]
        passed.append(counters.fd)
    return ChildProcess(
        name,
        lambda _first: arguments,
        pass_fds=tuple(passed),
        env=_child_environment(database_url),
    )


def _edge_workers(
    settings_file: Path, worker_sockets: list[socket.socket], database_url: str, counters: RateCounters
) -> list[ChildProcess]:
    """One child per edge worker, each with its own gateway and its own listening socket on the edge port
    (``join_listener``), among which the kernel spreads new connections, and all with the node's rate counters."""
    return [
        _listening_child(
            f"edge-worker-{index}",
            _child_command("edge-worker", settings_file, "--worker", str(index)),
            sock,
            database_url,
            counters=counters,
        )
        for index, sock in enumerate(worker_sockets)
    ]


def _api(
    settings_file: Path, api_socket: socket.socket, channel_socket: socket.socket, database_url: str
) -> ChildProcess:
    """The API process (``edgeplane.api.process``), which accepts configuration followers on ``channel_socket``."""
    command = _child_command("api", settings_file)
    return _listening_child("api", command, api_socket, database_url, channel=channel_socket)


async def _stop_all(children: list[ChildProcess]) -> None:
    await asyncio.gather(*(child.stop() for child in children))


def browsable_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens for a listener on ``host``: a wildcard address is where the listener
    listens, not where a browser goes, so it becomes the loopback address of its family."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}/"  # a name
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    return f"http://[{address}]:{port}/" if address.version == 6 else f"http://{address}:{port}/"


def node_name(settings: Settings) -> str:
    """This node's name in the cluster: the configured one, else the host's name and the data directory's id (made
    at its first use, so that two nodes on one host differ and a node keeps its name across restarts)."""
    if settings.node_name:
        return settings.node_name
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = settings.data_dir / "node-id"
    try:
        node_id = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        node_id = ""
    if not node_id:
        node_id = secrets.token_hex(4)
        path.write_text(node_id + "\n", encoding="ascii")
    host = "".join(character for character in socket.gethostname() if "!" <= character <= "~" and character != "/")
    return f"{host[:55]}-{node_id}"


async def serve(settings: Settings) -> None:
    """Supervises the parts of this node's role until SIGINT or SIGTERM: with the role ``all`` (the default), the edge
    workers, the API and the Logpush delivery; ``edge``: the edge workers and the intake that publishes their records
    to the log bus; ``api``: the API; ``delivery``: Logpush delivery from the log bus. Raises, before starting any
    child, ``ListenError`` when a port is taken, ``DatabaseUnavailable`` when the configuration database cannot be
    used and ``ClientDatabaseError`` when a client location database cannot be opened."""
    role = settings.role
    serves_edge = role in ("all", "edge")
    serves_api = role in ("all", "api")
    workers = settings.edge_worker_count
    edge_socket = bind_listener(settings.edge_host, settings.edge_port, share_port=workers > 1) if serves_edge else None
    api_socket = bind_listener(settings.api_host, settings.api_port) if serves_api else None
    ops_socket = bind_listener(settings.ops_host, settings.ops_port) if settings.ops_port is not None else None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    name = node_name(settings)
    # The configuration channel (``edgeplane.propagation``): the API accepts on it, the edge workers and delivery
    # of this machine connect to it; held here, so that followers that connect while the API restarts wait for it.
    # A node without the API follows the configuration through the database alone.
    channel = channel_path(settings.data_dir)
    channel_socket = bind_channel(channel) if serves_api else None
    database = Database(settings.database_url or default_database_url(settings.data_dir))
    try:
        await asyncio.to_thread(database.migrate)
    except SQLAlchemyError as exc:
        raise DatabaseUnavailable(
            f"cannot open the configuration database: {exc.__class__.__name__}: {exc.args[0]}"
        ) from None
    use_crs_rules_dir(settings.waf.crs_rules_dir)
    if role != "delivery" and not crs_installed():
        log.warning(
            "the OWASP Core Rule Set is not installed: the OWASP Core Ruleset cannot be deployed (install the "
            "modsecurity-crs package, or set waf.crs_rules_dir)",
            crs_rules_dir=str(settings.waf.crs_rules_dir),
        )
    if serves_api:
        if ensure_bootstrap(settings.data_dir, database):
            log.info(
                "created the bootstrap account, user, API token and zone",
                credentials_file=str(settings.data_dir / "credentials.json"),
            )
        ensure_install_secret(settings.data_dir)  # here, so that no two children race to create it
    chain: ChainProcess | None = None
    chain_networks: list[str] = []
    if serves_edge:
        # What would make every edge worker exit at start is refused here, once, rather than restarted forever.
        open_client_locator(settings, describe=True).close()
        chain_networks = [name for name, network in settings.networks.items() if not network.upstreams]
    if chain_networks:
        dev_chain = settings.dev_chain
        chain = ChainProcess(
            networks=chain_networks,
            data_dir=settings.data_dir / "chain" if dev_chain.persist else None,
            chain_id=dev_chain.chain_id,
            block_time=dev_chain.block_time_seconds,
            fresh=dev_chain.fresh,
            log_level=settings.log_level,
            log_format=settings.log_format,
        )
        await chain.start()
        if not await chain.wait_ready():
            log.error("the development chain did not become ready; its networks answer -32002 until it does")
        log.info(
            "networks without an upstream node are served by the embedded development chain",
            networks=chain_networks,
            chain_id=dev_chain.chain_id,
        )
    # The children's settings: the development chain as the upstream it serves, and this node's name resolved.
    edge_settings = _with_dev_chain(settings, chain).model_copy(update={"node_name": name})
    if serves_edge:
        for network_name, network in edge_settings.networks.items():
            if network_name not in chain_networks:
                log.info("network ready", network=network_name, upstreams=[node.label for node in network.upstreams])
    settings_file = _settings_file(settings, edge_settings)
    worker_sockets = (
        [edge_socket, *(join_listener(edge_socket) for _ in range(workers - 1))] if edge_socket is not None else []
    )
    # The node's rate counters (``edgeplane.rate_counters``): one table in shared memory for every edge worker, made
    # here so that it outlives a worker's restart.
    counters = RateCounters.create(settings.ratelimit.counter_slots) if serves_edge else None
    edge_workers = _edge_workers(settings_file, worker_sockets, database.url, counters) if counters else []
    api = (
        _api(settings_file, api_socket, channel_socket, database.url)
        if api_socket is not None and channel_socket is not None
        else None
    )
    logs = _log_child(settings, settings_file, database.url) if settings.logs.enabled else None
    children = [*edge_workers, *([api] if api is not None else []), *([logs] if logs is not None else [])]
    stopping = asyncio.Event()

    def stop() -> None:
        begin_shutdown()
        stopping.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    addresses = {
        "edge": f"http://{settings.edge_host}:{edge_socket.getsockname()[1]}" if edge_socket is not None else None,
        "api": f"http://{settings.api_host}:{api_socket.getsockname()[1]}" if api_socket is not None else None,
        "ops": f"http://{settings.ops_host}:{ops_socket.getsockname()[1]}" if ops_socket is not None else None,
    }
    description = NodeDescription(
        name=name,
        role=role,
        host=socket.gethostname(),
        pid=os.getpid(),
        version=__version__,
        addresses=", ".join(f"{part}={url}" for part, url in addresses.items() if url is not None),
    )
    in_cluster = database.engine.dialect.name == "postgresql"
    background: list[asyncio.Task[None]] = []
    ops_server = None
    started: list[ChildProcess] = []
    try:
        for child in children:
            await child.start()
            started.append(child)
        if in_cluster:
            background.append(asyncio.create_task(_beat(database, description), name="heartbeat"))
        if ops_socket is not None:
            ops_server = asgi_server(node_checks_app(_node_checks(settings, name, children, database)))
            background.append(asyncio.create_task(ops_server.serve([ops_socket]), name="ops-listener"))
        log.info(
            "edgeplane started",
            version=__version__,
            role=role,
            node=name,
            edge_workers=workers if serves_edge else 0,
            data_dir=str(settings.data_dir),
            **{part: url for part, url in addresses.items() if url is not None},
        )
        if api_socket is not None:
            log.info(
                "dashboard: sign in as the admin user with the password in the credentials file, or with an API token",
                url=browsable_url(settings.api_host, api_socket.getsockname()[1]),
                email=BOOTSTRAP_EMAIL,
                credentials_file=str(settings.data_dir / "credentials.json"),
            )
        await stopping.wait()
    finally:
        if ops_server is not None:
            ops_server.should_exit = True
        # The edge first, and the API with it (neither waits for the other): the edge workers journal the requests
        # they answered, which the intake takes last.
        await _stop_all([child for child in [*edge_workers, *([api] if api else [])] if child in started])
        for sock in worker_sockets:
            sock.close()
        if api_socket is not None:
            api_socket.close()
        if channel_socket is not None:
            channel_socket.close()
            channel.unlink(missing_ok=True)
        # The development chain served the edge workers only: it stops while delivery finishes.
        chain_stopped = asyncio.create_task(chain.stop()) if chain is not None else None
        if logs is not None:
            if logs in started:
                await logs.stop()  # last: it takes what the edge workers journalled until they stopped
            if serves_edge and settings.bus.url is None:
                await _ingest_left_journals(settings, workers)
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if ops_socket is not None:
            ops_socket.close()
        if in_cluster:
            with contextlib.suppress(SQLAlchemyError):
                await asyncio.to_thread(forget_node, database, name)
        if chain_stopped is not None:
            await chain_stopped
        database.close()


async def _ingest_left_journals(settings: Settings, workers: int) -> None:
    """Takes into the log store what the delivery process did not take (stopped before it was ready to): no other
    writer is left. Imported here: the supervisor never needs the log store otherwise, and its start is shorter
    without it."""
    from edgeplane.logs.delivery_process import ingest_journals

    try:
        taken = await asyncio.to_thread(ingest_journals, settings, workers)
    except Exception:  # the journals stay for the next start
        log.exception("request journals not taken into the log store at shutdown")
    else:
        if taken:
            log.info("request journals taken into the log store at shutdown", records=taken)


async def _beat(database: Database, node: NodeDescription) -> None:
    """Records this node in the cluster's register, then beats every ``HEARTBEAT_SECONDS``; a database that does not
    answer is tried again at the next beat."""
    starting = True
    while True:
        try:
            await asyncio.to_thread(record_heartbeat, database, node, starting=starting)
            starting = False
        except SQLAlchemyError as error:
            log.warning("cannot record this node's heartbeat", error=str(error.args[0] if error.args else error))
        await asyncio.sleep(HEARTBEAT_SECONDS)


def _node_checks(settings: Settings, name: str, children: list[ChildProcess], database: Database) -> NodeChecks:
    """The readiness checks of this node's role."""
    checks = {"children": children_check(children), "database": database_check(database)}
    if settings.bus.url is not None and settings.role != "api":
        checks["bus"] = bus_check(settings.bus.servers)
    return NodeChecks(role=settings.role, node_name=name, checks=checks)
