"""Logpush through a cluster on this machine, end to end: records published to the log bus as an edge node's intake
publishes them, delivered to S3 by 1, 2 and 3 delivery nodes, and what each step costs in CPU per record.

**The cluster** (real servers on loopback, as ``tests/e2e/test_cluster.py`` runs them): PostgreSQL, NATS JetStream,
SeaweedFS (the S3 destination), one API node (``edgeplane serve --role api``) through which ``--jobs`` Logpush jobs
are created, and the delivery nodes (``edgeplane serve --role delivery``, ``tests.support.cluster_node``), each a
supervisor and its delivery process. JetStream is **one server by default** (streams of one replica): on 2 cores a
cluster of three runs every message through three servers and their Raft log, and that CPU would be taken from
the delivery processes whose scaling is measured here; ``--replicas 3`` runs a cluster of three, as a deployment
does, to see what the replication costs.

**The jobs** (``http_requests``, S3 destination, ``max_upload_records`` ``--batch``, interval 300 s), created
disabled: the first four on the zone, the others on the account (the API allows four of each); by default in turn
filtered (``bench/pipeline.py``'s filter: five conditions, about a quarter of the records pass; its 10 fields) and
unfiltered (every field); ``--mix filtered`` or ``--mix unfiltered`` makes them all of one kind, to see what each
kind costs.

**Publishing.** ``--records`` records from ``bench/pipeline.py``'s ``edge_records`` (shaped as the edge writes them;
every record in the API's zone) are cut into sealed periods of ``--period-records`` (8192: an edge worker's period
under full load, ``edge.request_log``), each turned into a record batch (``batch_of_any_rows``: the intake's path
for rows given as dictionaries; not timed) and committed with ``BusPublisher.commit_columns`` under the key the
intake would give it, one period after the other, as one node's intake does. Timed: this process's CPU (conform,
Arrow IPC with zstd, the NATS client) and the JetStream server's CPU (``/proc`` of its processes) per record.
The stream is padded (records that fail the filter, then records that pass it) so that every job's records fill
whole batches: a job's last batch then uploads at once instead of waiting for its upload interval, and every
job's cursor reaches the stream's end.

**Consuming.** For N in 1, 2, 3, in alternating order over ``--rounds`` rounds: every job's cursor is put at the
stream's start in the database (``job_cursors``), N fresh delivery nodes are started and counted as members, the
jobs are enabled through the API (the clock starts), and the cursors are polled until every job's reaches the
stream's end (the clock stops: the last upload is confirmed). CPU is read from ``/proc`` over the same interval:
the delivery nodes (every process of each node's session), the JetStream server, PostgreSQL (the postmaster and
its backends), SeaweedFS, and the whole machine (``/proc/stat``): on a shared machine, what the other sessions take
shows there, and the ratios mean little once the machine's cores are all busy. Then the jobs are disabled, the
nodes stopped, and the objects read back: every job's objects must hold each record it selects at least once;
duplicates are counted and printed.

Figures: records delivered per second (jobs times records over the wall-clock time), delivery CPU per record and
job, and the throughput of N = 2 and 3 against N = 1 of the same round (the baseline), medians over the rounds. The
clock starts when the jobs are enabled: it includes up to a third of the lease time until a node's next claim
takes them (printed as "to lease", the time until every job is held).

Usage: ``.venv/bin/python bench/cluster.py [--records 300000] [--jobs 6] [--rounds 2] [--replicas 1] [--json]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for _path in (REPO_ROOT / "bench", REPO_ROOT, REPO_ROOT / "src"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
# The nodes run this tree's edgeplane, whatever the environment installed.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO_ROOT / "src"), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
)

import psycopg  # noqa: E402
import structlog  # noqa: E402

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition  # noqa: E402
from edgeplane.configuration.snapshot import DeliverySnapshot, ZoneRoute  # noqa: E402
from edgeplane.logs.bus_connection import BusConnection  # noqa: E402
from edgeplane.logs.bus_publisher import BusPublisher  # noqa: E402
from edgeplane.logs.bus_streams import INDEX_BITS, StreamLimits, ensure_streams, stream_name  # noqa: E402
from edgeplane.logs.delivery import plan_job  # noqa: E402
from edgeplane.logs.record_columns import batch_of_any_rows  # noqa: E402
from pipeline import FIELDS, FILTER, edge_records  # noqa: E402
from tests.support.cluster_node import ClusterNodeProcess  # noqa: E402
from tests.support.delivery_oracle import record_keep  # noqa: E402
from tests.support.nats_server import NatsCluster  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.seaweedfs import SeaweedS3  # noqa: E402

DATASET = "http_requests"
BUCKET = "bench-cluster"
JOBS_PER_SCOPE = 4  # the API's limit for a zone's jobs and for an account's
LEASE_SECONDS = 3.0  # the nodes claim jobs every third of it: a job starts within a second of being enabled
ROUND_TIMEOUT_SECONDS = 900.0
NODE_COUNTS = (1, 2, 3)
RAY_ID = re.compile(rb'"RayID":"([0-9a-f]{16})"')
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- CPU from /proc ------------------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # from the state on: ppid 1, session 3, utime 11, stime 12


def _seconds(fields: list[str]) -> float:
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_of(*, sessions: Collection[int] = (), parents: Collection[int] = (), pids: Collection[int] = ()) -> float:
    """CPU seconds of the running processes in ``sessions``, children of ``parents``, or in ``pids``."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        fields = _stat(pid)
        if fields is None:
            continue
        if pid in pids or int(fields[3]) in sessions or int(fields[1]) in parents:
            total += _seconds(fields)
    return total


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy so far (every core, every process, steal included) and those of
    them stolen by the virtual machine's host (``/proc/stat``)."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS, steal / CLOCK_TICKS


# -- the cluster ---------------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    postgres: PostgresServer
    nats: NatsCluster
    seaweed: SeaweedS3
    root: Path
    database_url: str
    replicas: int
    api: ClusterNodeProcess | None = None
    nodes: list[ClusterNodeProcess] = field(default_factory=list)

    def node(self, role: str, name: str) -> ClusterNodeProcess:
        settings = (
            '[logs.destinations]\nallowed_networks = ["127.0.0.0/8"]\n'
            "[logs]\nupload_retry_max_seconds = 2\n"
            f"[bus]\nstream_replicas = {self.replicas}\nlease_seconds = {LEASE_SECONDS}\n"
        )
        node = ClusterNodeProcess(
            role, self.root / name, database_url=self.database_url, bus=",".join(self.nats.urls), settings=settings
        )
        self.nodes.append(node)
        return node

    def v4(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self.api is not None
        return self.api.v4(method, path, **kwargs)

    def sql(self, query: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            cursor = connection.execute(query, parameters)
            return cursor.fetchall() if cursor.description else []

    def postmaster(self) -> int:
        return int((self.postgres.data / "postmaster.pid").read_text().split()[0])

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of the bus, PostgreSQL and SeaweedFS."""
        postmaster = self.postmaster()
        nats_pids = {node.process.pid for node in self.nats.nodes if node.process is not None}
        seaweed = self.seaweed._process
        return {
            "jetstream": cpu_of(pids=nats_pids),
            "postgres": cpu_of(parents={postmaster}, pids={postmaster}),
            "s3": cpu_of(sessions={seaweed.pid}) if seaweed is not None else 0.0,
        }


@dataclass(frozen=True)
class Job:
    id: int
    scope: str  # "zones/{zone}" or "accounts/{account}"
    filtered: bool
    prefix: str


def s3_conf(seaweed: SeaweedS3, prefix: str) -> str:
    return (
        f"s3://{BUCKET}/{prefix}/{{DATE}}?region={seaweed.region}&endpoint={seaweed.endpoint}"
        f"&access-key-id={seaweed.access_key}&secret-access-key={seaweed.secret_key}"
    )


def create_jobs(cluster: Cluster, count: int, batch: int, mix: str) -> list[Job]:
    """``count`` disabled jobs: filtered and unfiltered in turn (``mix`` "mixed"), or all of one kind."""
    jobs = []
    for index in range(count):
        scope = "zones/{zone}" if index < JOBS_PER_SCOPE else "accounts/{account}"
        filtered = index % 2 == 0 if mix == "mixed" else mix == "filtered"
        prefix = f"job-{index}"
        body: dict[str, Any] = {
            "dataset": DATASET,
            "destination_conf": s3_conf(cluster.seaweed, prefix),
            "max_upload_records": batch,
            "max_upload_interval_seconds": 300,
            "enabled": False,
        }
        if filtered:
            body |= {"filter": json.dumps(FILTER), "output_options": {"field_names": FIELDS}}
        created = cluster.v4("POST", f"/{scope}/logpush/jobs", json=body)
        jobs.append(Job(int(created["id"]), scope, filtered, prefix))
    return jobs


def set_enabled(cluster: Cluster, jobs: list[Job], enabled: bool) -> None:
    for job in jobs:
        cluster.v4("PUT", f"/{job.scope}/logpush/jobs/{job.id}", json={"enabled": enabled})


# -- records -------------------------------------------------------------------------------------------------------


def selector(cluster: Cluster) -> Any:
    """Whether the filtered jobs deliver a record (the per-record oracle of ``tests.support.delivery_oracle``)."""
    assert cluster.api is not None
    credentials = cluster.api.credentials
    zone = ZoneRoute(credentials["zone_id"], credentials["zone_name"], credentials["account_id"], "free")
    definition = LogpushJobDefinition(
        id=1,
        zone_id=zone.zone_id,
        account_id=zone.account_id,
        dataset=DATASET,
        enabled=True,
        destination_conf="s3://unused/x?region=us-east-1",
        filter=json.dumps(FILTER),
        output_options={"field_names": FIELDS},
        logpull_options=None,
        max_upload_bytes=0,
        max_upload_records=1000,
        max_upload_interval_seconds=30,
    )
    return record_keep(definition, plan_job(definition, DeliverySnapshot(version=1, zones={zone.zone_id: zone})))


def stream_records(count: int, batch: int, zone_name: str, keep: Any, seed: int) -> tuple[list[dict[str, Any]], int]:
    """``count`` records in the zone, padded so that both the unfiltered jobs' records and the filtered jobs'
    fill whole batches of ``batch``, the last record one that passes the filter; and how many pass it."""
    records = []
    passing = failing = None
    for record in edge_records(count, seed):
        record["ZoneName"] = zone_name
        records.append(record)
        if keep(record):
            passing = passing or record
        else:
            failing = failing or record
    if passing is None or failing is None:
        raise RuntimeError("the generated records need some that pass the filter and some that do not")
    selected = sum(1 for record in records if keep(record))
    add_passing = (-selected) % batch or batch
    add_failing = (-(count + add_passing)) % batch
    serial = iter(range(1 << 40))

    def copy(record: dict[str, Any]) -> dict[str, Any]:
        return record | {"RayID": f"ff{next(serial):014x}"}

    records += [copy(failing) for _ in range(add_failing)]
    records += [copy(passing) for _ in range(add_passing)]
    return records, selected + add_passing


@dataclass
class Published:
    records: int
    messages: int
    seconds: float
    cpu: float
    jetstream_cpu: float
    end_position: int


def publish(cluster: Cluster, records: list[dict[str, Any]], period: int) -> Published:
    """The records as sealed periods committed one after the other, as one edge node's intake does."""
    batches = [batch_of_any_rows(DATASET, records[at : at + period]) for at in range(0, len(records), period)]
    with BusConnection(cluster.nats.urls, name="bench-publisher", timeout=30) as bus:
        ensure_streams(bus, [DATASET], StreamLimits(replicas=cluster.replicas, max_bytes=16 << 30))
        publisher = BusPublisher(bus)
        publisher.commit_columns(DATASET, batches[:1], "bench-node/0/0.0/0")  # connects, learns the limits
        bus_before = cluster.cpu()["jetstream"]
        wall, cpu = time.perf_counter(), time.process_time()
        for number, batch in enumerate(batches[1:], start=1):
            publisher.commit_columns(DATASET, [batch], f"bench-node/0/{number}.0/0")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        bus_cpu = cluster.cpu()["jetstream"] - bus_before
        info = bus.run(lambda jetstream: jetstream.stream_info(stream_name(DATASET)))
    timed = len(records) - batches[0].num_rows
    if info.state.messages != len(batches):
        raise RuntimeError(f"the stream holds {info.state.messages} messages, not {len(batches)}")
    return Published(timed, len(batches) - 1, wall, cpu, bus_cpu, (info.state.last_seq + 1) << INDEX_BITS)


# -- one round of delivery -----------------------------------------------------------------------------------------


@dataclass
class Delivered:
    nodes: int
    seconds: float
    start_seconds: float  # from enabling the jobs until every job was leased
    cpu: float  # the delivery nodes
    others: dict[str, float]  # the servers, this process, the whole machine and what its host stole
    lines: int
    duplicates: int


def reset_cursors(cluster: Cluster, jobs: list[Job]) -> None:
    for job in jobs:
        cluster.sql(
            "INSERT INTO job_cursors (dataset, job_id, position) VALUES (%s, %s, 0) "
            "ON CONFLICT (dataset, job_id) DO UPDATE SET position = 0",
            (DATASET, job.id),
        )


def start_nodes(cluster: Cluster, names: list[str]) -> list[ClusterNodeProcess]:
    nodes = [cluster.node("delivery", name) for name in names]
    errors: list[BaseException] = []

    def start(node: ClusterNodeProcess) -> None:
        try:
            node.start()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=start, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return nodes


def wait_for(condition: Any, timeout: float, what: str, pause: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout} s")
        time.sleep(pause)


def node_cpu(nodes: list[ClusterNodeProcess]) -> float:
    return cpu_of(sessions={node._process.pid for node in nodes if node._process is not None})


def measured_cpu(cluster: Cluster) -> dict[str, float]:
    machine, steal = machine_cpu()
    return cluster.cpu() | {"benchmark": time.process_time(), "machine": machine, "steal": steal}


def deliver_round(
    cluster: Cluster, jobs: list[Job], count: int, published: Published, expected: dict[bool, int], label: str
) -> Delivered:
    """One measurement: ``count`` fresh delivery nodes deliver every job from the stream's start to its end."""
    reset_cursors(cluster, jobs)
    nodes = start_nodes(cluster, [f"delivery-{label}-{count}-{index}" for index in range(count)])
    try:
        wait_for(
            lambda: (
                cluster.sql(
                    "SELECT count(*) FROM delivery_members WHERE heartbeat > extract(epoch from now()) - %s",
                    (LEASE_SECONDS,),
                )[0][0]
                >= count
            ),
            30,
            "the delivery nodes as members",
        )
        ids = [job.id for job in jobs]
        before, others_before = node_cpu(nodes), measured_cpu(cluster)
        started = time.perf_counter()
        set_enabled(cluster, jobs, True)
        leased_at: float | None = None
        deadline = started + ROUND_TIMEOUT_SECONDS
        while True:
            if leased_at is None:
                leased = cluster.sql(
                    "SELECT count(*) FROM job_leases WHERE owner IS NOT NULL AND job_id = ANY(%s)", (ids,)
                )[0][0]
                if leased == len(jobs):
                    leased_at = time.perf_counter()
            positions = dict(
                cluster.sql("SELECT job_id, position FROM job_cursors WHERE dataset = %s", (DATASET,))  # type: ignore[arg-type]
            )
            if all(positions.get(job_id) == published.end_position for job_id in ids):
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"delivery with {count} nodes not done within {ROUND_TIMEOUT_SECONDS} s")
            if not all(node.running for node in nodes):
                raise RuntimeError("a delivery node exited: " + " ".join(n.log() for n in nodes if not n.running))
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        cpu = node_cpu(nodes) - before
        others = {name: value - others_before[name] for name, value in measured_cpu(cluster).items()}
        set_enabled(cluster, jobs, False)
    finally:
        for node in nodes:
            node.stop()
    return Delivered(
        count, seconds, (leased_at or started) - started, cpu, others, *verify_and_clear(cluster, jobs, expected)
    )


def verify_and_clear(cluster: Cluster, jobs: list[Job], expected: dict[bool, int]) -> tuple[int, int]:
    """Reads every job's objects back: each record a job selects (``expected``: how many, by whether the job is
    filtered) must be there, at least once. Returns the lines and the duplicates over all jobs, then deletes the
    objects."""
    client = cluster.seaweed.client()
    lines = duplicates = 0
    for job in jobs:
        keys = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=job.prefix + "/")
            for item in page.get("Contents", [])
        ]
        seen: Counter[bytes] = Counter()
        for key in keys:
            seen.update(RAY_ID.findall(gzip.decompress(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())))
        if len(seen) != expected[job.filtered]:
            raise RuntimeError(f"job {job.id}: {len(seen)} distinct records on S3, not {expected[job.filtered]}")
        lines += sum(seen.values())
        duplicates += sum(seen.values()) - len(seen)
        for at in range(0, len(keys), 1000):
            client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": key} for key in keys[at : at + 1000]]})
    return lines, duplicates


# -- the run -------------------------------------------------------------------------------------------------------


def _say(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)


def orders(rounds: int) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Each round's node counts: 1, 2, 3, then 3, 2, 1, and so on."""
    for number in range(rounds):
        yield number, NODE_COUNTS if number % 2 == 0 else tuple(reversed(NODE_COUNTS))


def run(args: argparse.Namespace) -> dict[str, Any]:
    progress = True  # on stderr
    root = Path(tempfile.mkdtemp(prefix="edgeplane-bench-cluster-"))
    postgres = PostgresServer().start()
    nats: NatsCluster | None = None
    seaweed: SeaweedS3 | None = None
    cluster: Cluster | None = None
    try:
        nats = NatsCluster(args.replicas).start()
        seaweed = SeaweedS3().start()
        seaweed.client().create_bucket(Bucket=BUCKET)
        cluster = Cluster(postgres, nats, seaweed, root, postgres.fresh_database("bench"), args.replicas)
        cluster.api = cluster.node("api", "api").start()
        jobs = create_jobs(cluster, args.jobs, args.batch, args.mix)
        records, selected = stream_records(
            args.records, args.batch, cluster.api.credentials["zone_name"], selector(cluster), args.seed
        )
        expected = {True: selected, False: len(records)}
        _say(progress, f"publishing {len(records):,} records ({selected:,} pass the filter) ...")
        published = publish(cluster, records, args.period_records)
        del records
        _say(
            progress,
            f"  {published.messages + 1} messages; CPU a record: publisher "
            f"{published.cpu / published.records * 1e6:.2f} us, JetStream "
            f"{published.jetstream_cpu / published.records * 1e6:.2f} us",
        )
        rounds: list[Delivered] = []
        for number, order in orders(args.rounds):
            for count in order:
                result = deliver_round(cluster, jobs, count, published, expected, f"r{number}")
                rounds.append(result)
                _say(
                    progress,
                    f"  round {number + 1}, {count} delivery node(s): {result.seconds:.1f} s, "
                    f"{result.cpu:.1f} s CPU, {result.lines:,} lines, {result.duplicates} duplicates",
                )
        return document(args, jobs, expected[False], published, rounds)
    finally:
        if cluster is not None:
            for node in cluster.nodes:
                node.stop()
        if seaweed is not None:
            seaweed.close()
        if nats is not None:
            nats.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


def document(
    args: argparse.Namespace, jobs: list[Job], stream_records: int, published: Published, rounds: list[Delivered]
) -> dict[str, Any]:
    """The run's figures: per node count, medians over the rounds; and N against 1 node, round by round."""
    job_records = len(jobs) * stream_records
    per_count = {count: [r for r in rounds if r.nodes == count] for count in NODE_COUNTS}

    def summary(items: list[Delivered]) -> dict[str, Any]:
        return {
            "records_per_second": statistics.median(job_records / r.seconds for r in items),
            "delivery_cpu_us_per_record_job": statistics.median(r.cpu / job_records * 1e6 for r in items),
            "records_per_delivery_cpu_second": statistics.median(job_records / r.cpu for r in items),
            "cores_used": statistics.median(r.cpu / r.seconds for r in items),
            "seconds": statistics.median(r.seconds for r in items),
            "start_seconds": statistics.median(r.start_seconds for r in items),
            "machine_cores_busy": statistics.median(r.others["machine"] / r.seconds for r in items),
            "steal_cores": statistics.median(r.others["steal"] / r.seconds for r in items),
            "outside_cores": statistics.median(
                (r.others["machine"] - r.cpu - sum(v for k, v in r.others.items() if k not in ("machine", "steal")))
                / r.seconds
                for r in items
            ),
            **{
                f"{name}_cpu_us_per_record_job": statistics.median(r.others[name] / job_records * 1e6 for r in items)
                for name in items[0].others
            },
            "duplicates": sum(r.duplicates for r in items),
        }

    ratios = {}
    for count in NODE_COUNTS[1:]:
        each = [base.seconds / other.seconds for base, other in zip(per_count[1], per_count[count], strict=True)]
        ratios[f"{count}/1"] = {"median": statistics.median(each), "rounds": each}
    return {
        "stream_records": stream_records,
        "jobs": len(jobs),
        "filtered_jobs": sum(job.filtered for job in jobs),
        "mix": args.mix,
        "batch": args.batch,
        "replicas": args.replicas,
        "publish": {
            "records": published.records,
            "messages": published.messages,
            "records_per_second": published.records / published.seconds,
            "publisher_cpu_us_per_record": published.cpu / published.records * 1e6,
            "jetstream_cpu_us_per_record": published.jetstream_cpu / published.records * 1e6,
        },
        "delivery": {str(count): summary(items) for count, items in per_count.items()},
        "throughput_against_one_node": ratios,
        "rounds": [vars(r) for r in rounds],
        "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
    }


def report(result: dict[str, Any]) -> None:
    publish = result["publish"]
    print(
        f"{result['stream_records']:,} records in the stream, {result['jobs']} jobs ({result['filtered_jobs']} "
        f"filtered), batches of {result['batch']:,}, JetStream replicas {result['replicas']}, "
        f"{result['cores']} cores"
    )
    print(
        f"publishing ({publish['messages']} periods): {publish['records_per_second']:,.0f} records/s; CPU a record: "
        f"publisher {publish['publisher_cpu_us_per_record']:.2f} us, JetStream "
        f"{publish['jetstream_cpu_us_per_record']:.2f} us"
    )
    print(
        "delivery, medians over the rounds (CPU in us per record and job; cores: the delivery nodes', the whole "
        "machine's, and those of processes outside the benchmark)"
    )
    print(
        f"  {'nodes':>5} {'records/s':>10} {'vs 1 node':>9} {'per CPU-s':>9} {'wall s':>7} {'cores':>5} "
        f"{'delivery':>8} {'JetStream':>9} {'Postgres':>8} {'S3':>6} {'to lease':>8} {'dups':>5} "
        f"{'machine':>7} {'others':>6}"
    )
    for count, row in result["delivery"].items():
        ratio = result["throughput_against_one_node"].get(f"{count}/1", {"median": 1.0})["median"]
        print(
            f"  {count:>5} {row['records_per_second']:>10,.0f} {ratio:>9.2f} "
            f"{row['records_per_delivery_cpu_second']:>9,.0f} {row['seconds']:>7.1f} "
            f"{row['cores_used']:>5.2f} {row['delivery_cpu_us_per_record_job']:>8.2f} "
            f"{row['jetstream_cpu_us_per_record_job']:>9.3f} {row['postgres_cpu_us_per_record_job']:>8.3f} "
            f"{row['s3_cpu_us_per_record_job']:>6.2f} {row['start_seconds']:>8.2f} {row['duplicates']:>5} "
            f"{row['machine_cores_busy']:>7.2f} {row['outside_cores']:>6.2f}"
        )
    for name, ratio in result["throughput_against_one_node"].items():
        rounds = ", ".join(f"{value:.2f}" for value in ratio["rounds"])
        print(f"  throughput {name} nodes: {ratio['median']:.2f} (rounds {rounds})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000, help="records generated (before the padding)")
    parser.add_argument("--jobs", type=int, default=6, help=f"Logpush jobs, 1 to {2 * JOBS_PER_SCOPE}")
    parser.add_argument("--batch", type=int, default=50_000, help="the jobs' max_upload_records")
    parser.add_argument("--period-records", type=int, default=8192, help="records of a sealed period (a message)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of 1, 2 and 3 delivery nodes")
    parser.add_argument("--replicas", type=int, choices=(1, 3), default=1, help="JetStream servers (and replicas)")
    parser.add_argument(
        "--mix",
        choices=("mixed", "filtered", "unfiltered"),
        default="mixed",
        help="the jobs: filtered and unfiltered in turn, or all of one kind (what each kind costs)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 2 * JOBS_PER_SCOPE:
        parser.error(f"--jobs must be 1 to {2 * JOBS_PER_SCOPE} (the API's limits of a zone and of an account)")
    if not 1_000 <= args.batch <= 1_000_000:
        parser.error("--batch must be 1000 to 1000000 (the API's bounds of max_upload_records)")
    if args.records < 1000 or args.rounds < 1 or not 1 <= args.period_records < 1 << INDEX_BITS:
        parser.error("--records must be at least 1000, --rounds at least 1, --period-records positive")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # the publisher's log, not stdout
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
