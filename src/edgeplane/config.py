"""Typed settings, layered: built-in defaults, then a TOML file, then ``EDGEPLANE_*`` environment variables, then
command-line flags (each layer overrides the ones before it).

The TOML file is ``--config FILE``, else ``$EDGEPLANE_CONFIG``, else ``<data dir>/edgeplane.toml`` when it exists.
Nested settings come from the environment with ``__`` between levels, for example ``EDGEPLANE_GATEWAY__MAX_BATCH_SIZE``;
``EDGEPLANE_NETWORKS`` takes JSON.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, IPvAnyNetwork, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

TraceFilterStrategy = Literal["auto", "native", "debug"]


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/edgeplane``, or ``~/.local/share/edgeplane``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeplane"


class UpstreamSettings(BaseModel):
    """One Ethereum node behind a network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    name: str | None = Field(default=None, description="label in logs and metrics; defaults to host:port")
    trace_filter: TraceFilterStrategy = Field(
        default="auto",
        description="native: the node serves trace_filter; debug: synthesise it from debug_traceBlockByNumber; "
        "auto: try native, switch to debug when the node lacks the method",
    )
    max_trace_filter_blocks: int | None = Field(
        default=None,
        ge=1,
        description="largest block range the node's own trace_filter accepts; larger ranges are split. "
        "Unset: known from the node's client version (anvil: 300), else unlimited",
    )
    max_logs_blocks: int | None = Field(
        default=None,
        ge=1,
        description="largest block range sent to the node in one eth_getLogs; larger ranges are split. Unset: "
        "unlimited, until the node refuses a range as too wide (then bisected, and its widest answered range kept)",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream url must be an http:// or https:// URL, got {url!r}")
        return url

    @property
    def label(self) -> str:
        """The name used in logs and metrics."""
        if self.name:
            return self.name
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


class NetworkSettings(BaseModel):
    """A network served at ``/v1/<name>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    upstreams: list[UpstreamSettings] = Field(default_factory=list)


class ResponseCacheSettings(BaseModel):
    """The gateway's cache of read answers, kept per head block (see ``gateway/response_cache.py``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_head_age_seconds: float = Field(
        default=0.05,
        ge=0,
        le=60,
        description="how long a read of the head block vouches for cached answers; 0 reads it for every answer",
    )
    write_settle_seconds: float = Field(
        default=2.0,
        ge=0,
        le=600,
        description="after a write, how long every cached answer waits for a head read, unless a new head comes first",
    )
    head_read_grace_seconds: float = Field(
        default=0.05,
        gt=0,
        le=60,
        description="how long a head read waits for slower nodes once one node told its head; also the pause after "
        "a head read no node answered",
    )
    head_read_timeout_seconds: float = Field(
        default=2.0, gt=0, description="how long one node may take to tell its head"
    )
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=0, description="answers kept per network and edge worker")
    max_entry_bytes: int = Field(default=1024 * 1024, ge=0, description="larger answers are not kept")
    finalized_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        description="answers about finalized blocks, kept across heads (least recently used out first), per network "
        "and edge worker; 0: none kept across heads",
    )
    realtime_max_age_seconds: float = Field(
        default=2.0,
        ge=0,
        description="how long an answer of a realtime method (eth_gasPrice, eth_blockNumber) is kept, even while the "
        "head stays the same",
    )


class MethodCostEntry(BaseModel):
    """What one call of a method costs, in compute units (``[gateway.costs.methods]``): ``base``, plus ``per_block``
    for each block a method that names a block range or count reads, at most ``cap``. A key left unset keeps
    edgeplane's default for the method (``src/edgeplane/gateway/method_costs.toml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: int | None = Field(default=None, ge=0, le=1_000_000, description="compute units of one call")
    per_block: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description="more per block of the call's range (eth_getLogs, trace_filter) or count (eth_feeHistory)",
    )
    cap: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000_000,
        description="the most one call costs with its blocks, and what a range that cannot be measured costs",
    )


def _method_name(name: str) -> str:
    if not name or "*" in name[:-1] or name == "*":
        raise ValueError(f"a method name, or a prefix ending in '*' (\"debug_*\"), got {name!r}")
    return name


class MethodCostSettings(BaseModel):
    """The cost table of ``edgeplane.jsonrpc.cost`` (``[gateway.costs]``, ``docs/configuration.md``): merged over
    edgeplane's defaults, method by method and key by key. A method is found by its exact name, else by the longest
    prefix entry (``"debug_*"``), else it costs ``default``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: int | None = Field(
        default=None, ge=0, le=1_000_000, description="compute units of a method the table does not list"
    )
    cap: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000_000,
        description="the most a call priced by its blocks costs when its method has no cap of its own",
    )
    methods: dict[str, int | MethodCostEntry] = Field(
        default_factory=dict,
        description='per method (or "prefix_*"): compute units, or {base, per_block, cap}',
    )

    @field_validator("methods")
    @classmethod
    def _method_names(cls, methods: dict[str, int | MethodCostEntry]) -> dict[str, int | MethodCostEntry]:
        for name, entry in methods.items():
            _method_name(name)
            if isinstance(entry, int) and not 0 <= entry <= 1_000_000:
                raise ValueError(f"{name}: compute units must be within 0..1000000, got {entry}")
        return methods


class UpstreamSelectionSettings(BaseModel):
    """How the pool scores its nodes and when it stops sending them reads (docs/gateway.md, "Scored selection")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_smoothing: float = Field(
        default=0.3, gt=0, le=1, description="weight of the newest exchange in a node's smoothed latency per method"
    )
    window_exchanges: int = Field(
        default=20, ge=1, description="the last exchanges of a node its error and throttling rates are taken over"
    )
    circuit_failure_ratio: float = Field(
        default=0.5, gt=0, le=1, description="share of failed exchanges in the window that opens a node's circuit"
    )
    circuit_min_exchanges: int = Field(
        default=5, ge=1, description="exchanges the window must hold before the circuit may open"
    )
    circuit_half_open_after_seconds: float = Field(
        default=5.0, gt=0, description="pause of an open circuit before one read is let through as a probe"
    )
    hedge_max_extra: int = Field(
        default=1, ge=0, description="extra nodes a slow read is sent to (0: reads are never hedged; writes never are)"
    )
    hedge_quantile: float = Field(
        default=0.9, gt=0, le=1, description="a read waits this quantile of its method's recent latency before hedging"
    )
    hedge_min_delay_seconds: float = Field(default=0.05, ge=0, description="the hedge delay's lower clamp")
    hedge_max_delay_seconds: float = Field(
        default=1.0,
        gt=0,
        description="the hedge delay's upper clamp, and the delay while a method's latency is unknown",
    )


class GatewaySettings(BaseModel):
    """Request handling and upstream behaviour of the gateway."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(default=5 * 1024 * 1024, ge=1024)
    max_answer_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1024,
        description="largest answer read from an upstream node; a larger one fails the request (-32002)",
    )
    max_batch_size: int = Field(default=100, ge=1)
    request_timeout_seconds: float = Field(default=30.0, gt=0)
    max_attempts: int = Field(default=3, ge=1, description="tries of one read across the pool's nodes")
    multiplex_reads: bool = Field(
        default=True, description="identical reads in flight share one upstream exchange (never writes)"
    )
    max_lag_blocks: int = Field(
        default=16,
        ge=0,
        description="how far a node's head may be below the pool's highest and still take reads that need the head",
    )
    health_check_interval_seconds: float = Field(default=5.0, gt=0)
    health_check_timeout_seconds: float = Field(default=3.0, gt=0)
    head_max_age_seconds: float = Field(
        default=1.0,
        ge=0,
        description="how old a known head block may be when resolving block tags for limits",
    )
    trace_filter_concurrency: int = Field(
        default=4, ge=1, description="upstream calls in flight while synthesising trace_filter"
    )
    logs_split_concurrency: int = Field(
        default=4, ge=1, description="upstream calls in flight for the parts of one split eth_getLogs"
    )
    cache: ResponseCacheSettings = Field(default_factory=ResponseCacheSettings)
    costs: MethodCostSettings = Field(default_factory=MethodCostSettings)
    selection: UpstreamSelectionSettings = Field(default_factory=UpstreamSelectionSettings)


class DevChainSettings(BaseModel):
    """The embedded development chain, the upstream of every network that has no node configured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chain_id: int = Field(default=1337, ge=1, description="not the id of any public network")
    block_time_seconds: float | None = Field(
        default=None, gt=0, description="mine every N seconds; unset: mine on every transaction"
    )
    persist: bool = Field(default=True, description="keep the chain in <data dir>/chain across restarts")
    fresh: bool = Field(default=False, description="discard the stored chain at start")


class DestinationSettings(BaseModel):
    """Where Logpush destinations may lead (see docs/destinations.md#what-destinations-may-reach)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_networks: tuple[IPvAnyNetwork, ...] = Field(
        default=(),
        description="loopback, private, link-local or reserved networks destinations may reach all the same "
        '(CIDR, such as "10.1.2.0/24" or "127.0.0.1/32"); cloud metadata addresses stay refused',
    )
    file_root: Path | None = Field(
        default=None,
        description="the directory every file:// destination must lie under; unset: <data dir>/destinations",
    )


class LogSettings(BaseModel):
    """Request logs: the log store between the edge and Logpush delivery."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="record every request in <data dir>/logs")
    retention_bytes: int = Field(default=1 << 30, ge=1 << 20, description="per dataset and edge worker")
    retention_seconds: float | None = Field(default=7 * 24 * 3600, gt=0)
    client_country_header: str | None = Field(
        default=None, description="trusted request header with the client's country (ISO 3166 alpha-2)"
    )
    client_asn_header: str | None = Field(default=None, description="trusted request header with the client's ASN")
    client_country_database: Path | None = Field(
        default=None,
        description="MaxMind-format database (GeoIP2/GeoLite2 Country or City) giving the client's country when "
        "the trusted header is unset or absent from a request",
    )
    client_asn_database: Path | None = Field(
        default=None,
        description="MaxMind-format database (GeoLite2 ASN) giving the client's ASN when the trusted header is unset "
        "or absent from a request; may be the same file as client_country_database",
    )
    upload_retry_max_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="longest pause between two attempts of a failed Logpush upload; the pause doubles from 1 s "
        "(or from this, when it is shorter) up to it",
    )
    destinations: DestinationSettings = Field(default_factory=DestinationSettings)

    @field_validator("client_country_database", "client_asn_database")
    @classmethod
    def _existing_file(cls, path: Path | None) -> Path | None:
        # A missing database stops the start with the settings' message, before anything is started; whether the
        # file is a MaxMind DB is known when the edge opens it (``edgeplane.edge.client_location``).
        if path is None:
            return None
        path = path.expanduser()
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        return path


class ApiSettings(BaseModel):
    """Bounds of the API listener (``/client/v4``, ``/healthz``, ``/metrics``), which shares its process with an
    edge worker: what one client may hold of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="larger request bodies are refused with 413, unread"
    )
    max_header_bytes: int = Field(
        default=64 * 1024, ge=1024, description="request line and headers; larger heads are refused with 431"
    )
    max_connections: int = Field(
        default=128,
        ge=1,
        description="open API connections; one more is answered 503 and closed at once (keep it well below the "
        "process's open-file limit, which the edge shares)",
    )
    idle_timeout_seconds: float = Field(
        default=15.0, gt=0, description="a connection with no request in progress is closed after this long"
    )
    request_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a request's line, headers and body must all arrive within this long of its first byte",
    )
    propagation_timeout_seconds: float = Field(
        default=2.0,
        ge=0,
        le=60,
        description="a configuration write answers once every edge worker applied it, or after this long (an edge "
        "worker still behind is reported and not waited for again until it catches up); 0: answer at once",
    )


class EdgeSettings(BaseModel):
    """Bounds of the edge listener's HTTP server (``docs/gateway.md``, "HTTP"): what one client may hold of an edge
    worker. The body's bound is ``gateway.max_body_bytes``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="request line and headers; larger heads are refused with 431 and the connection closed",
    )
    max_headers: int = Field(
        default=100, ge=8, le=10_000, description="header lines in a request; more are refused with 431"
    )
    max_connections: int = Field(
        default=10_000,
        ge=1,
        description="open client connections per edge worker (at most three quarters of the process's open-file "
        "limit); one more is answered 503 and closed at once",
    )
    idle_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a keep-alive connection with no request in progress, or a client that reads nothing of its "
        "answers, is closed after this long",
    )
    request_timeout_seconds: float = Field(
        default=15.0,
        gt=0,
        description="a request's line, headers and body must all arrive within this long of its first byte (408)",
    )
    websocket: bool = Field(
        default=True, description="accept WebSocket handshakes at /v1/<network> (off: refused with 405 as a GET)"
    )
    websocket_max_message_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="a WebSocket message (a JSON-RPC request or batch) larger than this closes the socket with 1009",
    )
    websocket_send_queue_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        description="what may wait to be sent to a WebSocket client that does not read, besides the socket's own "
        "64 KiB buffer; past it the socket is closed with 1008",
    )
    websocket_idle_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="a WebSocket on which the client sends nothing (no message, ping or pong) for this long is "
        "closed with 1001",
    )
    websocket_max_subscriptions: int = Field(
        default=100, ge=1, description="eth_subscribe subscriptions open on one WebSocket; one more is refused (-32005)"
    )
    websocket_head_poll_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="how often an edge worker asks a network for new blocks while it has newHeads subscribers",
    )


class WafSettings(BaseModel):
    """The managed WAF (``docs/waf.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    crs_rules_dir: Path = Field(
        default=Path("/usr/share/modsecurity-crs/rules"),
        description="the OWASP Core Rule Set's rule files (REQUEST-9*.conf and its .data files), compiled into the "
        "OWASP Core Ruleset; where Debian's modsecurity-crs package installs them by default",
    )


class RateLimitSettings(BaseModel):
    """The node's rate limiting counters (``docs/rate-limiting.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    counter_slots: int = Field(
        default=262_144,
        ge=1024,
        le=16_777_216,
        description="counters the node's shared table holds (64 bytes each, taken at start); when all are in use a "
        "new key takes the place of the least loaded one of its bucket, and the eviction is counted",
    )


def redacted_url(url: str) -> str:
    """``url`` as it may be logged or shown: its scheme, host, port and path, and ``***@`` for the credentials it
    carries (``nats://user:password@host:port``, ``nats://token@host:port``, ``postgresql://user:password@…``),
    never the credentials themselves."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(not a URL)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    credentials = "***@" if parts.username is not None or parts.password is not None else ""
    return f"{parts.scheme}://{credentials}{host}{port}{parts.path}"


Role = Literal["all", "edge", "api", "delivery"]

# A node's name: printable ASCII without spaces or "/", at most 64 characters (a part of the log bus's publication
# keys, ``edgeplane.logs.journal_intake``).
NODE_NAME_PATTERN = r"^[!-.0-~]{1,64}$"


class BusSettings(BaseModel):
    """The log bus between edge nodes and delivery nodes when edgeplane runs on many machines (NATS JetStream):
    unset, the edge's records go to the log store in the data directory, as on one machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(
        default=None,
        description="nats://HOST:PORT of the JetStream servers, comma-separated (any of them; the client finds the "
        "rest)",
    )
    stream_replicas: int = Field(default=3, ge=1, le=5, description="copies of each dataset's stream in the cluster")
    retention_seconds: float = Field(default=7 * 24 * 3600, gt=0, description="how long a stream keeps records")
    retention_bytes: int = Field(default=10 << 30, ge=1 << 20, description="the most a dataset's stream keeps")
    duplicate_window_seconds: float = Field(
        default=600.0,
        ge=1,
        le=24 * 3600,
        description="how long the streams remember a publication's key: an edge node that republishes a period "
        "within it (after a crash) adds no duplicate",
    )

    lease_seconds: float = Field(
        default=10.0,
        ge=1,
        le=600,
        description="how long a delivery node holds a Logpush job without renewing its lease: after a delivery node "
        "dies, its jobs wait at most this long for another node to take them over",
    )

    @field_validator("url")
    @classmethod
    def _nats_urls(cls, url: str | None) -> str | None:
        if url is None:
            return None
        for part in url.split(","):
            split = urlsplit(part.strip())
            try:
                port = split.port
            except ValueError:
                port = None
            if split.scheme not in ("nats", "tls") or not split.hostname or port is None or split.path not in ("", "/"):
                raise ValueError(f"not a nats://HOST:PORT URL: {redacted_url(part.strip())!r}")
        return url

    @property
    def servers(self) -> list[str]:
        """The servers' URLs, one by one (with their credentials: log ``redacted_url`` of them)."""
        return [part.strip() for part in (self.url or "").split(",") if part.strip()]


def _default_networks() -> dict[str, NetworkSettings]:
    return {name: NetworkSettings() for name in ("mainnet", "sepolia", "holesky")}


class Settings(BaseSettings):
    """Everything ``edgeplane serve`` reads at start."""

    model_config = SettingsConfigDict(env_prefix="EDGEPLANE_", env_nested_delimiter="__", extra="forbid", frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    role: Role = Field(
        default="all",
        description="what this machine runs: all (one machine: edge, API and delivery), edge (edge workers, "
        "publishing their records to the bus), api (the control plane) or delivery (Logpush, from the bus)",
    )
    node_name: str | None = Field(
        default=None,
        pattern=NODE_NAME_PATTERN,
        description="this node's name in the cluster (edgeplane status, log publications); unset: the host's name "
        "and the data directory's id",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL of the configuration database; unset: SQLite in the data dir"
    )
    edge_host: str = "127.0.0.1"
    edge_port: int = Field(default=8787, ge=0, le=65535)
    edge_workers: int = Field(default=0, ge=0, le=64, description="edge worker processes; 0: one per core")
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8788, ge=0, le=65535)
    ops_host: str = "127.0.0.1"
    ops_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="port of the supervisor's health, readiness and metrics listener (/healthz, /readyz, /metrics); "
        "unset: none (the API port serves them where the API runs)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "console"] = "json"
    networks: dict[str, NetworkSettings] = Field(default_factory=_default_networks)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    dev_chain: DevChainSettings = Field(default_factory=DevChainSettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    edge: EdgeSettings = Field(default_factory=EdgeSettings)
    waf: WafSettings = Field(default_factory=WafSettings)
    ratelimit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    bus: BusSettings = Field(default_factory=BusSettings)

    @model_validator(mode="after")
    def _role_needs(self) -> Settings:
        # A node of a cluster shares its configuration and its records with the others: neither can be a file of
        # its own data directory.
        if self.role != "all" and self.database_url is None:
            raise ValueError(f"--role {self.role} needs --database-url (the cluster's PostgreSQL)")
        if self.role in ("edge", "delivery") and self.bus.url is None:
            raise ValueError(f"--role {self.role} needs --bus nats://HOST:PORT (the cluster's log bus)")
        return self

    @property
    def edge_worker_count(self) -> int:
        """How many edge worker processes serve client traffic (the process of ``serve`` is one of them)."""
        return self.edge_workers or os.cpu_count() or 1

    @field_validator("networks")
    @classmethod
    def _network_names(cls, networks: dict[str, NetworkSettings]) -> dict[str, NetworkSettings]:
        for name in networks:
            if not name or "/" in name or not name.isascii():
                raise ValueError(f"invalid network name {name!r}")
        return networks

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config_file = _config_file.get()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if config_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)


_config_file: ContextVar[Path | None] = ContextVar("edgeplane_config_file", default=None)


class ConfigError(Exception):
    """The settings could not be loaded; the message says which file or value is wrong."""


def parse_upstream_flag(flag: str) -> tuple[str, str]:
    """Splits ``NETWORK=URL``. Raises ``ConfigError`` when the form is wrong."""
    network, sep, url = flag.partition("=")
    if not sep or not network or not url:
        raise ConfigError(f"--upstream takes NETWORK=URL, got {flag!r}")
    return network, url


def load_settings(
    *,
    config_file: Path | None = None,
    overrides: dict[str, Any] | None = None,
    upstreams: list[str] | None = None,
) -> Settings:
    """Loads the layered settings. ``overrides`` are flag values (``None`` values are ignored); ``upstreams`` are
    ``NETWORK=URL`` flags, which replace the upstreams of the networks they name and add networks not yet known.

    Raises ``ConfigError`` with a readable message for a missing file or an invalid value.
    """
    from pydantic import ValidationError

    flag_values = {key: value for key, value in (overrides or {}).items() if value is not None}
    if config_file is None:
        env_file = os.environ.get("EDGEPLANE_CONFIG")
        if env_file:
            config_file = Path(env_file)
        else:
            data_dir = flag_values.get("data_dir") or os.environ.get("EDGEPLANE_DATA_DIR")
            candidate = Path(data_dir or default_data_dir()) / "edgeplane.toml"
            config_file = candidate if candidate.is_file() else None
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config file not found: {config_file}")
    token = _config_file.set(config_file)
    try:
        settings = Settings(**flag_values)
        if upstreams:
            networks = dict(settings.networks)
            flagged: dict[str, list[UpstreamSettings]] = {}
            for flag in upstreams:
                network, url = parse_upstream_flag(flag)
                flagged.setdefault(network, []).append(UpstreamSettings(url=url))
            for network, nodes in flagged.items():
                networks[network] = NetworkSettings(upstreams=nodes)
            settings = Settings(**{**settings.model_dump(), "networks": networks})
    except ValidationError as exc:
        raise ConfigError(_describe(exc, config_file)) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read settings: {exc}") from None
    finally:
        _config_file.reset(token)
    return settings


def _describe(exc: Any, config_file: Path | None) -> str:
    lines = [f"invalid settings{f' (config file {config_file})' if config_file else ''}:"]
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(root)"
        lines.append(f"  {where}: {error['msg']}")
    return "\n".join(lines)
