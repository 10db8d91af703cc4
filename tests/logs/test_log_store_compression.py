"""The log store's compressed column blocks: smaller on disk, read back the same, readable whatever compression wrote
them, and read a few columns at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.record_columns import COMPRESSIONS, Compression, batch_of_rows, decode_block, encode_batch, rows_of

HTTP = "http_requests"


def edge_rows(count: int) -> list[dict[str, Any]]:
    """Rows that repeat as the edge's do: a few hosts, paths, agents; numbers that move."""
    return [
        {
            "RayID": f"{0x8F00000000000000 + i:016x}",
            "ZoneName": "example.com",
            "ClientRequestHost": f"rpc{i % 3}.example.com",
            "ClientRequestMethod": "POST",
            "ClientRequestPath": "/v1/mainnet",
            "ClientRequestUserAgent": ("web3.py/7.6.0", "ethers/6.13.4", "viem/2.21.0")[i % 3],
            "EdgeResponseStatus": 200 if i % 50 else 429,
            "EdgeResponseBytes": 180 + i % 40,
            "EdgeStartTimestamp": 1_764_000_000_000_000_000 + i * 1_000_000,
            "EdgeEndTimestamp": 1_764_000_000_000_000_000 + i * 1_000_000 + 400_000,
            "ClientSrcPort": 30_000 + i % 20_000,
        }
        for i in range(count)
    ]


def stored_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*.seg"))


def fill(directory: Path, compression: Compression, rows: list[dict[str, Any]]) -> None:
    store = SegmentedLogStore(directory, compression=compression)
    try:
        batch = batch_of_rows(HTTP, rows)
        assert batch is not None
        store.append_columns(HTTP, batch)
        store.flush()
    finally:
        store.close()


def read_rows(directory: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    store = SegmentedLogStore(directory, writable=False)
    found: list[dict[str, Any]] = []
    position = 0
    while True:
        batch = store.read_columns(HTTP, position, columns=columns)
        if not batch.parts:
            return found
        for part in batch.parts:
            assert isinstance(part, pa.RecordBatch)
            found.extend({key: value for key, value in row.items() if value is not None} for row in rows_of(part))
        position = batch.next_position


def test_the_default_compression_keeps_the_edge_s_rows_in_a_fifth_of_the_space(tmp_path: Path) -> None:
    rows = edge_rows(20_000)
    fill(tmp_path / "zstd", "zstd", rows)
    fill(tmp_path / "none", "none", rows)
    assert stored_bytes(tmp_path / "none") >= 5 * stored_bytes(tmp_path / "zstd")
    assert read_rows(tmp_path / "zstd") == read_rows(tmp_path / "none") == rows


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_blocks_of_every_compression_read_alike_in_one_stream(tmp_path: Path, compression: Compression) -> None:
    rows = edge_rows(3_000)
    fill(tmp_path, "none", rows[:1_000])  # an older store's blocks, then blocks of this compression after them
    fill(tmp_path, compression, rows[1_000:])
    assert read_rows(tmp_path) == rows


def test_a_reader_of_a_few_columns_gets_those_and_every_record(tmp_path: Path) -> None:
    rows = edge_rows(2_000)
    fill(tmp_path, "zstd", rows)
    wanted = ["ZoneName", "EdgeResponseStatus", "NotInTheBlock"]
    assert read_rows(tmp_path, wanted) == [
        {"ZoneName": row["ZoneName"], "EdgeResponseStatus": row["EdgeResponseStatus"]} for row in rows
    ]
    # None of the columns in the block: the records are still counted, with some column.
    assert len(read_rows(tmp_path, ["NotInTheBlock"])) == len(rows)


@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {"RayID": st.text(max_size=20), "ZoneName": st.sampled_from(["a.example", "b.example"])},
            optional={"EdgeResponseStatus": st.integers(100, 599), "ClientRequestPath": st.text(max_size=40)},
        ),
        min_size=1,
        max_size=50,
    ),
    compression=st.sampled_from(COMPRESSIONS),
    names=st.lists(st.sampled_from(["RayID", "ZoneName", "EdgeResponseStatus", "ClientRequestPath"]), unique=True),
)
def test_a_block_decodes_to_its_batch_in_any_projection(
    rows: list[dict[str, Any]], compression: Compression, names: list[str]
) -> None:
    batch = batch_of_rows(HTTP, rows)
    assert batch is not None
    decoded = decode_block(bytes(encode_batch(batch, compression)), names or None)
    assert decoded.num_rows == batch.num_rows
    if not names:
        assert decoded.equals(batch)
        return
    present = [name for name in batch.schema.names if name in names]
    if present:
        assert decoded.schema.names == present
        assert decoded.equals(batch.select(present))
