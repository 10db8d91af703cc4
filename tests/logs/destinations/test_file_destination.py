"""``file://`` destinations: whole objects only, ``{DATE}`` per object, failures classified."""

from __future__ import annotations

import asyncio
import gzip
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from edgeplane.logs.destination_conf import parse_destination_conf
from edgeplane.logs.destinations import (
    DestinationRejected,
    FileUploader,
    open_destination,
)


def uploader(directory: Path | str) -> FileUploader:
    destination = open_destination(parse_destination_conf(f"file://{directory}"))
    assert isinstance(destination, FileUploader)
    return destination


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def test_put_writes_the_batch_under_its_name(tmp_path: Path) -> None:
    body = gzip.compress(b'{"RayID":"1"}\n')
    await uploader(tmp_path).put("20240102T030405Z_20240102T030435Z_abc.log.gz", body)
    assert (tmp_path / "20240102T030405Z_20240102T030435Z_abc.log.gz").read_bytes() == body
    assert listing(tmp_path) == ["20240102T030405Z_20240102T030435Z_abc.log.gz"]


async def test_object_names_with_slashes_create_directories(tmp_path: Path) -> None:
    await uploader(tmp_path).put("a/b/c.gz", b"x")
    assert (tmp_path / "a" / "b" / "c.gz").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("when", "directory"),
    [
        (datetime(2024, 1, 2, 23, 59, tzinfo=UTC), "20240102"),
        (datetime(2024, 1, 2, 23, 59), "20240102"),  # naive is UTC
        (datetime.fromisoformat("2024-01-02T20:00:00-05:00"), "20240103"),  # converted to UTC first
    ],
)
async def test_date_is_expanded_per_object(tmp_path: Path, when: datetime, directory: str) -> None:
    await uploader(f"{tmp_path}/logs/{{DATE}}").put("batch.gz", b"x", when=when)
    assert (tmp_path / "logs" / directory / "batch.gz").read_bytes() == b"x"


async def test_date_defaults_to_today_in_utc(tmp_path: Path) -> None:
    await uploader(f"{tmp_path}/{{DATE}}").put("batch.gz", b"x")
    assert (tmp_path / datetime.now(UTC).strftime("%Y%m%d") / "batch.gz").exists()


async def test_uploading_a_name_again_replaces_the_object(tmp_path: Path) -> None:
    destination = uploader(tmp_path)
    await destination.put("batch.gz", b"first")
    await destination.put("batch.gz", b"second")
    assert (tmp_path / "batch.gz").read_bytes() == b"second"
    assert len(listing(tmp_path)) == 1


async def test_a_reader_never_sees_a_partial_object(tmp_path: Path) -> None:
    destination = uploader(tmp_path)
    size = 4 * 1024 * 1024
    target = tmp_path / "batch.gz"
    await destination.put("batch.gz", b"a" * size)
    seen: set[tuple[int, int]] = set()
    done = threading.Event()

    def read_continuously() -> None:
        while not done.is_set():
            data = target.read_bytes()
            seen.add((len(data), len(set(data))))

    reader = threading.Thread(target=read_continuously)
    reader.start()
    try:
        for letter in b"bcdefghij":
            await destination.put("batch.gz", bytes([letter]) * size)
    finally:
        done.set()
        reader.join()
    assert seen == {(size, 1)}
    assert listing(tmp_path) == ["batch.gz"]  # no temporary file left


async def test_files_are_not_world_readable(tmp_path: Path) -> None:
    await uploader(tmp_path).put("batch.gz", b"x")
    assert (tmp_path / "batch.gz").stat().st_mode & 0o777 == 0o640


async def test_write_challenge_writes_the_text(tmp_path: Path) -> None:
    await uploader(f"{tmp_path}/{{DATE}}").write_challenge("ownership-challenge-1a2b.txt", "challenge-text")
    day = datetime.now(UTC).strftime("%Y%m%d")
    assert (tmp_path / day / "ownership-challenge-1a2b.txt").read_text() == "challenge-text"


async def test_concurrent_puts_all_land(tmp_path: Path) -> None:
    destination = uploader(tmp_path)
    await asyncio.gather(*(destination.put(f"b{number}.gz", bytes([number])) for number in range(20)))
    assert listing(tmp_path) == sorted(f"b{number}.gz" for number in range(20))


@pytest.mark.parametrize(
    "layout",
    [
        "directory is a file",
        "parent is a file",
    ],
)
async def test_a_directory_that_cannot_exist_is_rejected(tmp_path: Path, layout: str) -> None:
    (tmp_path / "file").write_text("in the way")
    directory = tmp_path / "file" if layout == "directory is a file" else tmp_path / "file" / "below"
    with pytest.raises(DestinationRejected, match=r"^file://.*cannot write"):
        await uploader(directory).put("batch.gz", b"x")
    assert listing(tmp_path) == ["file"]


@pytest.mark.parametrize(
    "name", ["", "/absolute.gz", "a//b.gz", "../escape.gz", "a/../../b.gz", "./x.gz", "a\\b.gz", "a\nb.gz"]
)
async def test_object_names_that_could_escape_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="object name"):
        await uploader(tmp_path).put(name, b"x")
    assert listing(tmp_path) == []
