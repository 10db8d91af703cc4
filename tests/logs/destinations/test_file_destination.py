"""``file://`` destinations: whole objects only, ``{DATE}`` per object, failures classified, nothing written outside
the file root."""

from __future__ import annotations

import asyncio
import gzip
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.logs.destination_conf import FileDestination, parse_destination_conf
from edgeplane.logs.destinations import (
    DestinationPolicy,
    DestinationRejected,
    FileUploader,
    open_destination,
)
from edgeplane.logs.errors import DestinationError


def uploader(directory: Path | str, root: Path) -> FileUploader:
    destination = open_destination(
        parse_destination_conf(f"file://{directory}"), policy=DestinationPolicy(file_root=root)
    )
    assert isinstance(destination, FileUploader)
    return destination


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def everything_in(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


async def test_put_writes_the_batch_under_its_name(tmp_path: Path) -> None:
    body = gzip.compress(b'{"RayID":"1"}\n')
    await uploader(tmp_path, tmp_path).put("20240102T030405Z_20240102T030435Z_abc.log.gz", body)
    assert (tmp_path / "20240102T030405Z_20240102T030435Z_abc.log.gz").read_bytes() == body
    assert listing(tmp_path) == ["20240102T030405Z_20240102T030435Z_abc.log.gz"]


async def test_object_names_with_slashes_create_directories(tmp_path: Path) -> None:
    await uploader(tmp_path, tmp_path).put("a/b/c.gz", b"x")
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
    await uploader(f"{tmp_path}/logs/{{DATE}}", tmp_path).put("batch.gz", b"x", when=when)
    assert (tmp_path / "logs" / directory / "batch.gz").read_bytes() == b"x"


async def test_date_defaults_to_today_in_utc(tmp_path: Path) -> None:
    await uploader(f"{tmp_path}/{{DATE}}", tmp_path).put("batch.gz", b"x")
    assert (tmp_path / datetime.now(UTC).strftime("%Y%m%d") / "batch.gz").exists()


async def test_uploading_a_name_again_replaces_the_object(tmp_path: Path) -> None:
    destination = uploader(tmp_path, tmp_path)
    await destination.put("batch.gz", b"first")
    await destination.put("batch.gz", b"second")
    assert (tmp_path / "batch.gz").read_bytes() == b"second"
    assert len(listing(tmp_path)) == 1


async def test_a_reader_never_sees_a_partial_object(tmp_path: Path) -> None:
    destination = uploader(tmp_path, tmp_path)
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
    await uploader(tmp_path, tmp_path).put("batch.gz", b"x")
    assert (tmp_path / "batch.gz").stat().st_mode & 0o777 == 0o640


async def test_write_challenge_writes_the_text(tmp_path: Path) -> None:
    await uploader(f"{tmp_path}/{{DATE}}", tmp_path).write_challenge("ownership-challenge-1a2b.txt", "challenge-text")
    day = datetime.now(UTC).strftime("%Y%m%d")
    assert (tmp_path / day / "ownership-challenge-1a2b.txt").read_text() == "challenge-text"


async def test_concurrent_puts_all_land(tmp_path: Path) -> None:
    destination = uploader(tmp_path, tmp_path)
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
        await uploader(directory, tmp_path).put("batch.gz", b"x")
    assert listing(tmp_path) == ["file"]


@pytest.mark.parametrize(
    "name", ["", "/absolute.gz", "a//b.gz", "../escape.gz", "a/../../b.gz", "./x.gz", "a\\b.gz", "a\nb.gz"]
)
async def test_object_names_that_could_escape_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="object name"):
        await uploader(tmp_path, tmp_path).put(name, b"x")
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    "conf_path",
    [
        "/etc/edgeplane-test",
        "{root}-sibling/x",  # a sibling whose name starts like the root's
        "{root}/../escape",
        "{root}/a/../../escape",
        "{root}/%2e%2e/escape",
        "{root}/a%2f..%2f..%2fescape",
    ],
)
async def test_a_directory_outside_the_root_is_never_written(tmp_path: Path, conf_path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    conf = f"file://{conf_path.format(root=root)}"
    with pytest.raises(DestinationError, match=r"under|'\.\.'"):  # refused at the API, by the parser or the policy
        DestinationPolicy(file_root=root).admit(parse_destination_conf(conf))
    # and by the destination itself, for a conf that came by another way
    destination = FileUploader(FileDestination(unquote(conf.removeprefix("file://"))), root=root)
    with pytest.raises(DestinationRejected, match=r"under|'\.\.'"):
        await destination.put("batch.gz", b"x")
    assert everything_in(tmp_path) == ["root"]


@pytest.mark.parametrize("link_at", ["directory", "below", "date"])
async def test_a_symbolic_link_below_the_root_is_not_followed(tmp_path: Path, link_at: str) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    day = datetime.now(UTC).strftime("%Y%m%d")
    if link_at == "directory":
        (root / "logs").symlink_to(outside)
    elif link_at == "below":
        (root / "logs").mkdir()
        (root / "logs" / "sub").symlink_to(outside)
    else:
        (root / "logs").mkdir()
        (root / "logs" / day).symlink_to(outside)
    conf = {"directory": "logs", "below": "logs/sub", "date": "logs/{DATE}"}[link_at]
    with pytest.raises(DestinationRejected, match="symbolic link"):
        await uploader(f"{root}/{conf}", root).put("batch.gz", b"x")
    assert listing(outside) == []


async def test_a_link_swapped_in_during_writes_leads_nowhere(tmp_path: Path) -> None:
    # The directory is replaced by a link between writes: the next write refuses it rather than follow it.
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    destination = uploader(f"{root}/logs", root)
    await destination.put("one.gz", b"1")
    (root / "logs").rename(root / "old")
    (root / "logs").symlink_to(outside)
    with pytest.raises(DestinationRejected):
        await destination.put("two.gz", b"2")
    assert listing(outside) == []


async def test_the_root_is_created_and_may_itself_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "root").symlink_to(real)
    await uploader(f"{tmp_path}/root/logs", tmp_path / "root").put("batch.gz", b"x")
    assert (real / "logs" / "batch.gz").read_bytes() == b"x"
    fresh = tmp_path / "fresh" / "root"
    await uploader(fresh, fresh).put("batch.gz", b"y")
    assert (fresh / "batch.gz").read_bytes() == b"y"


async def test_without_a_root_nothing_is_written(tmp_path: Path) -> None:
    destination = FileUploader(FileDestination(str(tmp_path)), root=None)
    with pytest.raises(DestinationRejected, match="not enabled"):
        await destination.put("batch.gz", b"x")
    assert listing(tmp_path) == []


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(["a", "b", "..", ".", "", "%2e%2e", "%2E.", "a%2f..", "..%2f..", "{DATE}", "%00", "root-x"]),
        max_size=6,
    ),
    st.sampled_from(["/srv/root", "/srv/root/", "/srv", "/", "/etc"]),
)
def test_whatever_the_conf_says_an_admitted_directory_lies_under_the_root(segments: list[str], start: str) -> None:
    root = Path("/srv/root")
    conf = "file://" + start.rstrip("/") + "/" + "/".join(segments)
    try:
        destination = parse_destination_conf(conf)
        DestinationPolicy(file_root=root).admit(destination)
    except DestinationError:
        return
    assert isinstance(destination, FileDestination)
    resolved = os.path.normpath(destination.directory.replace("{DATE}", "20240102"))
    assert resolved == str(root) or resolved.startswith(f"{root}/")
