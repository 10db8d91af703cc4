"""What reading the log bus costs: a message fetched by its sequence (JetStream's direct get, what ``BusSource``
does) against the same messages pushed by a pull consumer, on one server (R1) and on a cluster of three (R3).

``--messages`` messages of ``--records`` generated ``http_requests`` records each are published with
``BusPublisher``; then read three ways, timed in wall-clock and in this process's CPU seconds (the servers run in
their own processes):

1. ``BusSource.read_columns`` from position 0 to the end, with no cache: fetch and decode, as a job reads;
2. the direct gets alone (no decode);
3. a pull consumer (ephemeral, no acks) fetching 50 messages a request (no decode).

Usage: ``.venv/bin/python bench/log_bus_reads.py [--messages 300] [--records 2000]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from nats.js import JetStreamContext  # noqa: E402
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy  # noqa: E402

from edgeplane.logs.bus_connection import BusConnection  # noqa: E402
from edgeplane.logs.bus_publisher import BusPublisher  # noqa: E402
from edgeplane.logs.bus_source import BusSource, MessageCache  # noqa: E402
from edgeplane.logs.bus_streams import StreamLimits, ensure_streams, stream_name, stream_subject  # noqa: E402
from edgeplane.logs.record_columns import batch_of_rows, encode_batch  # noqa: E402
from tests.support.nats_server import NatsCluster  # noqa: E402

DATASET = "http_requests"


class _Cursors:
    def load(self, dataset: str, job_id: int) -> int | None:
        return None

    def save(self, dataset: str, job_id: int, position: int) -> None:
        pass

    def delete(self, dataset: str, job_id: int) -> None:
        pass


def _timed(label: str, work: Callable[[], object]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    print(f"  {label}: {time.perf_counter() - wall:.3f} s wall, {time.process_time() - cpu:.3f} s CPU")


def run(size: int, messages: int, records: int) -> None:
    cluster = NatsCluster(size).start()
    try:
        with BusConnection(cluster.urls, timeout=10) as bus:
            ensure_streams(bus, [DATASET], StreamLimits(replicas=size))
            rows = [
                {
                    "RayID": f"{number:016x}",
                    "ClientRequestHost": "rpc.example.com",
                    "ClientRequestPath": f"/v1/{number % 97}",
                    "ClientIP": f"192.0.2.{number % 250}",
                    "EdgeResponseStatus": 200,
                    "ZoneName": "example.com",
                }
                for number in range(records)
            ]
            batch = batch_of_rows(DATASET, rows)
            assert batch is not None
            print(f"R{size}: {messages} messages of {records} records, {len(encode_batch(batch))} bytes each")
            publisher = BusPublisher(bus)
            _timed(
                "publish", lambda: [publisher.commit_columns(DATASET, [batch], f"bench/{n}") for n in range(messages)]
            )
            source = BusSource(bus, _Cursors(), cache=MessageCache(0))

            def read() -> None:
                position = 0
                while (part := source.read_columns(DATASET, position, 20_000, 64 << 20)).parts:
                    position = part.next_position

            stream = stream_name(DATASET)

            async def direct(jetstream: JetStreamContext) -> None:
                for sequence in range(1, messages + 1):
                    await jetstream.get_msg(stream, sequence, direct=True)

            async def consumer(jetstream: JetStreamContext) -> None:
                config = ConsumerConfig(
                    ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=1
                )
                subscription = await jetstream.pull_subscribe(stream_subject(DATASET), stream=stream, config=config)
                got = 0
                while got < messages:
                    got += len(await subscription.fetch(50, timeout=10))
                await subscription.unsubscribe()

            _timed("read_columns (direct get and decode)", read)
            _timed("direct gets alone", lambda: bus.run(direct, timeout=120))
            _timed("pull consumer, 50 a fetch", lambda: bus.run(consumer, timeout=120))
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--records", type=int, default=2000)
    options = parser.parse_args()
    for size in (1, 3):
        run(size, options.messages, options.records)


if __name__ == "__main__":
    main()
