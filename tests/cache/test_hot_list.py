"""``warm --hot-list FILE``: a file someone wrote, read as every parsed file is: never waited
on (a FIFO), never read without end (/dev/zero), bounded in size and in line length (a bad
line skipped and counted, the rest pinned); one line, never a traceback, when refused."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from imgwarm.cache.steps.score import MAX_HOT_LINE, MAX_HOT_LIST
from imgwarm.config import Settings
from tests.support.cli import Cli
from tests.support.sites import Site, make_site, thumbnails


@pytest.fixture
def site(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    return make_site(settings, tmp_path, ram, count=2)


def warm_with(site: Site, hot_list: Path | str) -> tuple[int, str, str]:
    done = Cli()("warm", "--hot-list", str(hot_list), env=site.env())
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr
    return done.exit_code, done.stdout, done.stderr


def refused(site: Site, hot_list: Path | str, said: str) -> None:
    code, _, stderr = warm_with(site, hot_list)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and said in lines[0], stderr
    assert str(hot_list) in lines[0]


def test_a_fifo_is_refused_at_once(site: Site, tmp_path: Path) -> None:
    fifo = tmp_path / "hot.fifo"
    os.mkfifo(fifo)
    result: list[tuple[int, str, str]] = []
    worker = threading.Thread(target=lambda: result.append(warm_with(site, fifo)), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the reader: a writer that closes at once
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("warm waited on a FIFO given as the hot list")
    code, _, stderr = result[0]
    assert code != 0 and "not a regular file" in stderr and str(fifo) in stderr


def test_dev_zero_is_refused(site: Site) -> None:
    refused(site, "/dev/zero", "not a regular file")


def test_a_hot_list_past_the_limit_is_refused(site: Site, tmp_path: Path) -> None:
    big = tmp_path / "hot.txt"
    with big.open("wb") as handle:  # sparse: no disk taken
        handle.truncate(MAX_HOT_LIST + 1)
    refused(site, big, "larger than")


def test_a_long_line_is_skipped_and_the_rest_pinned(site: Site, tmp_path: Path) -> None:
    wide = [v.path for m in site.manifests() for v in m.variants if v.width > 640]
    small = thumbnails(site)
    hot = tmp_path / "hot.txt"
    hot.write_bytes(b"/" + b"a" * (MAX_HOT_LINE + 1) + b"\n" + f"/{wide[0]}\n".encode()
                    + b"/../etc/passwd\n")
    site.settings = site.settings.updated(ram_budget=str(sum(small.values()) + (1 << 20)))
    report = site.warm(hot_list=hot)
    assert wide[0] in site.in_tier("ram")  # pinned: in RAM whatever its width
    assert report.unsafe_paths == 2  # the long line and the unsafe path
