"""The log bus on real NATS JetStream servers: what the intake commits is read back by delivery's reader whole, in
order, once; positions go inside messages; retention and outages are told apart; and on a cluster of three, a node
killed while publishing loses and duplicates nothing that was acknowledged."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from edgeplane.configuration.snapshot import DeliverySnapshot
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.bus_connection import BusConnection, BusUnavailable, check_servers
from edgeplane.logs.bus_publisher import BusPublisher
from edgeplane.logs.bus_source import BusSource, MessageCache, message_of, position_of
from edgeplane.logs.bus_streams import StreamLimits, ensure_streams, stream_name, stream_subject
from edgeplane.logs.delivery import Batch, JobDelivery, plan_job
from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import ColumnBatch, LogReader, PositionLostError, SegmentedLogStore
from edgeplane.logs.record_columns import batch_of_any_rows, batch_of_rows, encode_batch, rows_of
from edgeplane.logs.request_journal import RequestJournal, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.logs.retention_watch import RetentionWatch
from edgeplane.waf.events import FIREWALL_EVENTS
from tests.edge.test_request_log import emit
from tests.logs.test_delivery_columns import FILTER, ZONES, job, records
from tests.support.nats_server import NatsCluster, start_nats_cluster, start_nats_server

DATASETS = (HTTP_REQUESTS, FIREWALL_EVENTS)


class MemoryCursors:
    """``SharedCursors`` in a dictionary."""

    def __init__(self) -> None:
        self.positions: dict[tuple[str, int], int] = {}

    def load(self, dataset: str, job_id: int) -> int | None:
        return self.positions.get((dataset, job_id))

    def save(self, dataset: str, job_id: int, position: int) -> None:
        self.positions[(dataset, job_id)] = position

    def delete(self, dataset: str, job_id: int) -> None:
        self.positions.pop((dataset, job_id), None)


@pytest.fixture(scope="module")
def server() -> Iterator[NatsCluster]:
    cluster = start_nats_server()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def connection(server: NatsCluster) -> Iterator[BusConnection]:
    """A connection to the module's server, with both streams new."""
    with BusConnection(server.urls, timeout=3.0) as bus:
        for dataset in DATASETS:
            name = stream_name(dataset)
            try:
                bus.run(lambda jetstream, name=name: jetstream.delete_stream(name))  # type: ignore[misc]
            except BusUnavailable:
                pass  # not there yet
        ensure_streams(bus, DATASETS, StreamLimits())
        yield bus


def requests(first: int, count: int, **extra: Any) -> pa.RecordBatch:
    """``count`` records numbered from ``first`` by their ``RayID``."""
    rows = [
        {"RayID": f"{number:016x}", "ClientRequestHost": "rpc.example.com", "EdgeResponseStatus": 200, **extra}
        for number in range(first, first + count)
    ]
    batch = batch_of_rows(HTTP_REQUESTS, rows)
    assert batch is not None
    return batch


def read_all(source: BusSource, dataset: str, position: int, **bounds: Any) -> tuple[list[pa.RecordBatch], int]:
    """Every record from ``position`` to the end, read by ``bounds``; positions strictly increase."""
    parts: list[pa.RecordBatch] = []
    while True:
        read: ColumnBatch = source.read_columns(dataset, position, **bounds)
        if not read.parts:
            return parts, position
        assert read.next_position > position
        parts += read.parts
        position = read.next_position


def ray_ids(parts: list[pa.RecordBatch]) -> list[str]:
    return [row["RayID"] for part in parts for row in rows_of(part, ["RayID"])]


def test_servers_are_urls_of_nats() -> None:
    assert check_servers(["nats://10.0.0.1:4222", "tls://bus.example:4222"]) == (
        "nats://10.0.0.1:4222",
        "tls://bus.example:4222",
    )
    for bad in ([], ["http://a:1"], ["nats://a"], ["nats://a:1/x"], ["nats://:1"]):
        with pytest.raises(ValueError, match="server"):
            check_servers(bad)
    with pytest.raises(ValueError, match="a list of URLs"):
        check_servers("nats://a:1")


def test_records_come_back_as_they_were_committed(connection: BusConnection) -> None:
    publisher = BusPublisher(connection)
    source = BusSource(connection, MemoryCursors())
    start = source.end_position(HTTP_REQUESTS)
    loose = batch_of_any_rows(HTTP_REQUESTS, [{"RayID": "00000000000000ff", "EdgeResponseBytes": 1 << 70}])
    committed = [requests(0, 500, ZoneName="a.example"), loose, requests(500, 3)]
    publisher.commit_columns(HTTP_REQUESTS, committed, "node-a/edge-0/1.1/0")
    events = batch_of_any_rows(FIREWALL_EVENTS, [{"RayID": "00000000000000ab", "Action": "block"}])
    publisher.commit_columns(FIREWALL_EVENTS, [events], "node-a/edge-0/1.1/1")

    parts, end = read_all(source, HTTP_REQUESTS, start)
    assert [row for part in parts for row in rows_of(part)] == [row for batch in committed for row in rows_of(batch)]
    assert end == source.end_position(HTTP_REQUESTS)
    assert source.lag_records(HTTP_REQUESTS, start) == 504
    assert source.lag_records(HTTP_REQUESTS, end) == 0
    (event,) = read_all(source, FIREWALL_EVENTS, 0)[0]
    assert rows_of(event) == rows_of(events)
    narrow = source.read_columns(HTTP_REQUESTS, start, columns=["RayID"])
    assert narrow.parts[0].schema.names == ["RayID"]


def test_a_commit_again_under_its_key_is_not_stored_twice(connection: BusConnection) -> None:
    publisher = BusPublisher(connection, max_message_bytes=4096)  # several messages a commit
    source = BusSource(connection, MemoryCursors())
    batch = requests(0, 3000)
    publisher.commit_columns(HTTP_REQUESTS, [batch], "n/edge-0/7.1/0")
    end = source.end_position(HTTP_REQUESTS)
    assert message_of(end)[0] > 2
    publisher.commit_columns(HTTP_REQUESTS, [batch], "n/edge-0/7.1/0")  # a crash between commit and delete
    assert BusSource(connection, MemoryCursors()).end_position(HTTP_REQUESTS) == end
    publisher.commit_columns(HTTP_REQUESTS, [batch], "n/edge-0/8.1/0")  # another period: stored
    parts, _end = read_all(BusSource(connection, MemoryCursors()), HTTP_REQUESTS, 0)
    assert ray_ids(parts) == ray_ids([batch]) * 2
    with pytest.raises(ValueError, match="needs a key"):
        publisher.commit_columns(HTTP_REQUESTS, [batch], None)
    with pytest.raises(ValueError, match="needs a key"):
        publisher.commit_columns(HTTP_REQUESTS, [batch], "a key")


def test_a_batch_over_the_message_bound_is_split_and_read_back_whole_and_in_order(connection: BusConnection) -> None:
    publisher = BusPublisher(connection, max_message_bytes=4096)
    batches = [requests(0, 2000), requests(2000, 1500)]
    publisher.commit_columns(HTTP_REQUESTS, batches, "n/edge-1/1.1/0")
    source = BusSource(connection, MemoryCursors())
    assert message_of(source.end_position(HTTP_REQUESTS))[0] > 5  # several messages
    expected = ray_ids(batches)
    parts, _end = read_all(source, HTTP_REQUESTS, 0)
    assert ray_ids(parts) == expected
    # in small reads, each stopping inside a message, positions strictly increasing
    for bounds in ({"max_records": 7}, {"max_records": 1000, "max_bytes": 3000}):
        parts, _end = read_all(
            BusSource(connection, MemoryCursors(), cache=MessageCache(0)), HTTP_REQUESTS, 0, **bounds
        )
        assert ray_ids(parts) == expected


def test_a_read_goes_on_from_inside_a_message(connection: BusConnection) -> None:
    BusPublisher(connection).commit_columns(HTTP_REQUESTS, [requests(0, 100)], "n/edge-0/3.1/0")
    source = BusSource(connection, MemoryCursors())
    first = source.read_columns(HTTP_REQUESTS, 0, max_records=40)
    assert first.next_position == position_of(1, 40)
    rest = source.read_columns(HTTP_REQUESTS, first.next_position)
    assert ray_ids(rest.parts) == [f"{number:016x}" for number in range(40, 100)]
    assert rest.next_position == position_of(2) == source.end_position(HTTP_REQUESTS)
    assert source.lag_records(HTTP_REQUESTS, first.next_position) == 60
    assert source.read_columns(HTTP_REQUESTS, rest.next_position).parts == []


def test_a_position_retention_deleted_raises_position_lost(connection: BusConnection) -> None:
    for dataset in DATASETS:  # a stream made with a small bound (a node never shrinks one that exists)
        name = stream_name(dataset)
        connection.run(lambda jetstream, name=name: jetstream.delete_stream(name))  # type: ignore[misc]
    ensure_streams(connection, DATASETS, StreamLimits(max_bytes=64 << 10))
    publisher = BusPublisher(connection)
    for period in range(40):
        publisher.commit_columns(HTTP_REQUESTS, [requests(period * 200, 200)], f"n/edge-0/{period}.1/0")
    source = BusSource(connection, MemoryCursors(), state_seconds=0)
    oldest = source.oldest_position(HTTP_REQUESTS)
    assert message_of(oldest)[0] > 1
    with pytest.raises(PositionLostError) as lost:
        source.read_columns(HTTP_REQUESTS, position_of(1, 5))
    assert lost.value.oldest_position == oldest
    assert lost.value.lost > 0
    read = source.read_columns(HTTP_REQUESTS, oldest, max_records=1)
    assert read.parts
    assert read.next_position == oldest + 1
    outlook = source.retention_outlook(HTTP_REQUESTS, oldest)
    assert outlook.held_records > 0
    assert outlook.bytes_left <= (64 << 10)
    assert outlook.seconds_left is not None
    assert outlook.seconds_left > 0
    warned: list[str] = []

    class Status:
        def failed(self, job_id: int, when: object, message: str) -> None:
            warned.append(message)

    watch = RetentionWatch(3, HTTP_REQUESTS, [source], Status(), look_seconds=0)
    assert watch.observe({0: oldest}) == pytest.approx(7 * 86400, abs=60)  # by age: nothing grew yet
    for period in range(40, 45):
        publisher.commit_columns(HTTP_REQUESTS, [requests(period * 200, 200)], f"n/edge-0/{period}.1/0")
    left = watch.observe({0: oldest})
    assert left is not None
    assert left < 60  # by size: the stream is at its bound and growing
    assert warned


def test_delivery_reads_the_bus_as_it_reads_a_store_partition(connection: BusConnection, tmp_path: Path) -> None:
    given = records(3000, seed=25)
    batches = [batch_of_any_rows(HTTP_REQUESTS, given[start : start + 700]) for start in range(0, 3000, 700)]
    BusPublisher(connection, max_message_bytes=16 << 10).commit_columns(HTTP_REQUESTS, batches, "n/edge-0/1.1/0")
    plan = plan_job(job(filter=FILTER, zone_id="z1"), DeliverySnapshot(version=1, zones=ZONES))

    def delivered(partition: LogReader, start: int) -> list[bytes]:
        delivery = JobDelivery(plan, [partition], destination=None, status=None)  # type: ignore[arg-type]
        batch = Batch(positions={0: start})
        while delivery._read_into(batch):
            pass
        assert batch.positions[0] == partition.end_position(HTTP_REQUESTS)
        assert partition.lag_records(HTTP_REQUESTS, batch.positions[0]) == 0
        return batch.encoded

    with SegmentedLogStore(tmp_path / "store") as store:
        store.commit_columns(HTTP_REQUESTS, batches)
        from_store = delivered(store, 0)
    from_bus = delivered(BusSource(connection, MemoryCursors()), 0)
    assert from_bus == from_store
    assert len(from_bus) > 100


def test_cursors_are_kept_in_the_shared_store(connection: BusConnection) -> None:
    cursors = MemoryCursors()
    source = BusSource(connection, cursors)
    BusPublisher(connection).commit_columns(HTTP_REQUESTS, [requests(0, 10)], "n/edge-0/1.1/0")
    position = source.open_cursor(HTTP_REQUESTS, 4)
    assert position == source.end_position(HTTP_REQUESTS)
    assert cursors.positions == {(HTTP_REQUESTS, 4): position}
    source.save_cursor(HTTP_REQUESTS, 4, position_of(1, 3))
    assert source.open_cursor(HTTP_REQUESTS, 4) == source.load_cursor(HTTP_REQUESTS, 4) == position_of(1, 3)
    source.delete_cursor(HTTP_REQUESTS, 4)
    assert source.load_cursor(HTTP_REQUESTS, 4) is None


def test_the_intake_commits_to_the_bus_under_keys_a_repeat_does_not_store_twice(
    connection: BusConnection, tmp_path: Path
) -> None:
    journal = RequestJournal(tmp_path / "edge-0.journal")
    log = RequestLog(journal)
    emit(log, ray_id="00000000000000a1")
    emit(log, ray_id="00000000000000a2")
    log.flush()
    assert sealed_periods(journal.directory)
    kept = tmp_path / "kept"
    shutil.copytree(journal.directory, kept)  # the period as a crash before its delete would leave it
    intake = JournalIntake({journal.directory: BusPublisher(connection)}, node_id="node-a")
    assert intake.ingest() == 2
    assert sealed_periods(journal.directory) == []
    source = BusSource(connection, MemoryCursors())
    end = source.end_position(HTTP_REQUESTS)
    shutil.rmtree(journal.directory)
    shutil.copytree(kept, journal.directory)
    again = JournalIntake({journal.directory: BusPublisher(connection)}, node_id="node-a")
    assert again.ingest() == 2  # acknowledged as duplicates ...
    assert BusSource(connection, MemoryCursors()).end_position(HTTP_REQUESTS) == end  # ... not stored
    parts, _end = read_all(source, HTTP_REQUESTS, 0)
    assert ray_ids(parts) == ["00000000000000a1", "00000000000000a2"]
    log.close()
    with pytest.raises(ValueError, match="node id"):
        JournalIntake({}, node_id="a/b")


def test_a_bus_that_is_down_leaves_the_period_for_a_later_ingest(tmp_path: Path) -> None:
    alone = start_nats_server()
    try:
        with BusConnection(alone.urls, timeout=1.0) as bus:
            ensure_streams(bus, DATASETS, StreamLimits())
            journal = RequestJournal(tmp_path / "edge-3.journal")
            log = RequestLog(journal)
            emit(log, ray_id="00000000000000b1")
            log.flush()
            publisher = BusPublisher(bus)
            publisher.commit_columns(HTTP_REQUESTS, [requests(0, 1)], "x/edge-0/1.1/0")
            intake = JournalIntake({journal.directory: publisher}, node_id="node-b")
            alone.kill(0)
            with pytest.raises(BusUnavailable):
                publisher.commit_columns(HTTP_REQUESTS, [requests(1, 1)], "x/edge-0/2.1/0")
            started = time.monotonic()
            assert intake.ingest() == 0
            assert time.monotonic() - started < 5  # bounded by the timeout, never hangs
            assert len(sealed_periods(journal.directory)) == 1  # kept
            plan = plan_job(job(), DeliverySnapshot(version=1, zones=ZONES))
            reading = JobDelivery(plan, [BusSource(bus, MemoryCursors())], destination=None, status=None)  # type: ignore[arg-type]
            assert not reading._read_into(Batch(positions={0: 0}))  # a job reads again later, not stopped
            alone.restart(0)
            deadline = time.monotonic() + 15
            while not intake.ingest():
                assert time.monotonic() < deadline, "the intake did not commit once the bus was back"
            assert sealed_periods(journal.directory) == []
            parts, _end = read_all(BusSource(bus, MemoryCursors()), HTTP_REQUESTS, 0)
            # the publish the client sent once the server was back, and the intake's own retry: stored once
            assert ray_ids(parts).count("00000000000000b1") == 1
            log.close()
    finally:
        alone.stop()


def test_a_node_killed_while_publishing_loses_and_duplicates_no_acknowledged_batch() -> None:
    cluster = start_nats_cluster()
    try:
        with BusConnection(cluster.urls, timeout=2.0) as bus:
            ensure_streams(bus, DATASETS, StreamLimits(replicas=3))
            publisher = BusPublisher(bus, max_message_bytes=16 << 10)  # a few messages a commit
            info = bus.run(lambda jetstream: jetstream.stream_info(stream_name(HTTP_REQUESTS)))
            assert info.cluster is not None
            assert info.cluster.leader is not None
            leader = int(info.cluster.leader.removeprefix("n"))
            acknowledged: list[int] = []
            deadline = time.monotonic() + 40
            for number in range(60):
                if number == 20:
                    cluster.kill(leader)  # the stream's leader, mid-stream
                while True:
                    try:
                        publisher.commit_columns(HTTP_REQUESTS, [requests(number * 100, 100)], f"n/edge-0/{number}.1/0")
                        break
                    except BusUnavailable:  # no stream leader while the others elect one: again, as the intake would
                        assert time.monotonic() < deadline, "the cluster did not take the records again"
                        time.sleep(0.05)
                acknowledged.append(number)
                if number == 40:
                    cluster.restart(leader, wait=False)
            parts, _end = read_all(BusSource(bus, MemoryCursors()), HTTP_REQUESTS, 0)
        expected = ray_ids([requests(number * 100, 100) for number in acknowledged])
        assert ray_ids(parts) == expected  # each once, in order
    finally:
        cluster.stop()


def test_a_retry_split_otherwise_duplicates_records_and_loses_none(connection: BusConnection) -> None:
    # The first try splits finely and fails after a few messages; the retry (a server with a larger max_payload)
    # splits coarsely: its messages carry other ids, so the stream stores them rather than drop them as duplicates.
    batch = requests(0, 5000)
    real_run = connection.run
    calls = 0

    def failing_run(work: Any, timeout: float | None = None) -> Any:
        nonlocal calls
        calls += 1
        if calls > 4:
            raise BusUnavailable("gone")
        return real_run(work, timeout)

    connection.run = failing_run  # type: ignore[method-assign]
    with pytest.raises(BusUnavailable):
        BusPublisher(connection, max_message_bytes=3000).commit_columns(HTTP_REQUESTS, [batch], "node/w0/1.1/0")
    connection.run = real_run  # type: ignore[method-assign]
    BusPublisher(connection).commit_columns(HTTP_REQUESTS, [batch], "node/w0/1.1/0")
    parts, _end = read_all(BusSource(connection, MemoryCursors()), HTTP_REQUESTS, 0)
    assert set(ray_ids(parts)) == set(ray_ids([batch]))


def test_a_node_with_smaller_limits_does_not_shrink_the_stream(connection: BusConnection) -> None:
    publisher = BusPublisher(connection)
    for number in range(20):
        publisher.commit_columns(HTTP_REQUESTS, [requests(number * 100, 100)], f"node/w0/{number}.1/0")
    name = stream_name(HTTP_REQUESTS)
    before = connection.run(lambda jetstream: jetstream.stream_info(name))
    ensure_streams(connection, DATASETS, StreamLimits(max_bytes=1 << 10, max_age_seconds=600))
    after = connection.run(lambda jetstream: jetstream.stream_info(name))
    assert after.state.messages == before.state.messages == 20
    assert after.config.max_bytes == before.config.max_bytes
    ensure_streams(connection, DATASETS, StreamLimits(max_bytes=2 << 30))  # growing it is done
    grown = connection.run(lambda jetstream: jetstream.stream_info(name))
    assert grown.config.max_bytes == 2 << 30
    assert grown.state.messages == 20


@pytest.mark.parametrize(
    "payload",
    [b"not arrow", "columns of another kind"],
)
def test_a_message_edgeplane_does_not_publish_is_skipped(connection: BusConnection, payload: bytes | str) -> None:
    # Anyone allowed to publish on the subject could send one: the records around it are still delivered.
    if isinstance(payload, str):  # an Arrow stream, of columns the dataset does not have
        payload = encode_batch(pa.record_batch({"EdgeResponseStatus": pa.array(["not a number"])}), "zstd")
    publisher = BusPublisher(connection)
    publisher.commit_columns(HTTP_REQUESTS, [requests(0, 10)], "n/edge-0/1.1/0")
    connection.run(lambda jetstream: jetstream.publish(stream_subject(HTTP_REQUESTS), bytes(payload)))
    publisher.commit_columns(HTTP_REQUESTS, [requests(10, 10)], "n/edge-0/2.1/0")
    parts, _end = read_all(BusSource(connection, MemoryCursors()), HTTP_REQUESTS, 0)
    assert ray_ids(parts) == ray_ids([requests(0, 20)])


def test_a_cursor_past_the_end_of_a_stream_made_anew_reads_it_from_its_start(connection: BusConnection) -> None:
    # The job's cursor was saved far into a stream that was then deleted and made again (a lost disk, an operator):
    # the new stream's records are all new to the job.
    given = records(300, seed=7)
    BusPublisher(connection).commit_columns(HTTP_REQUESTS, [batch_of_any_rows(HTTP_REQUESTS, given)], "n/e/1.1/0")
    plan = plan_job(job(zone_id="z1"), DeliverySnapshot(version=1, zones=ZONES))
    source = BusSource(connection, MemoryCursors())
    delivery = JobDelivery(plan, [source], destination=None, status=None)  # type: ignore[arg-type]
    batch = Batch(positions={0: position_of(5000)})
    delivery._read_into(batch)  # past the end: the position goes back to the stream's start
    assert batch.positions[0] == source.oldest_position(HTTP_REQUESTS)
    while delivery._read_into(batch):
        pass
    assert batch.positions[0] == source.end_position(HTTP_REQUESTS)
    in_zone = sum(1 for record in given if record["ZoneName"] == "example.com")
    assert in_zone > 0
    assert len(batch.encoded) == in_zone
