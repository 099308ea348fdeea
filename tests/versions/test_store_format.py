"""A store says its format: the record (imgwarm-format.json at the origin's root) is written
on the first write, locally and in S3 (moto's server over HTTP), read back, never replaced;
two processes racing on a fresh store end with one record; and the record is read once a
command, not once a file."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import FormatTooNew
from imgwarm.pipeline.batch import run_batch
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores
from imgwarm.store.format import (
    FORMAT_RECORD,
    REFRESH,
    STORE_FORMAT,
    WRITE,
    FormatGate,
    imgwarm_version,
)
from imgwarm.store.local import LocalStore
from tests.support.cli import Cli
from tests.support.images import photo
from tests.support.servers import S3Server
from tests.support.sites import settings_env
from tests.support.versions import NEWER, mark_local, record_bytes, refusal

CURRENT = {"format": STORE_FORMAT, "readable_by": STORE_FORMAT,
           "written_by": f"imgwarm {imgwarm_version()}"}


def _jpeg(path: Path, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(photo(320, 200, seed=seed).jpegsave_buffer()))
    return path


def _s3_settings(s3: S3Server, bucket: str, prefix: str = "") -> Settings:
    return load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=s3.endpoint,
                         s3_prefix=prefix, widths="160,320")


def test_the_first_write_leaves_the_record_and_a_read_leaves_none(
        settings: Settings, run_cli: Cli, tmp_path: Path) -> None:
    origin = settings.store.origin_root
    env = settings_env(settings)
    assert run_cli("fsck", env=env).exit_code == 0  # a reading command writes nothing
    assert not (origin / FORMAT_RECORD).exists()
    result = run_cli("optimize", _jpeg(tmp_path / "one.jpg"), env=env)
    assert result.exit_code == 0, result.stderr
    assert json.loads((origin / FORMAT_RECORD).read_bytes()) == CURRENT
    assert Stores.local(settings.store).check() is not None


def test_a_record_there_is_never_replaced(settings: Settings, run_cli: Cli,
                                          tmp_path: Path) -> None:
    """A store written by another version of the same format keeps its record as it is (the
    record says which version first wrote it: never rewritten, so never downgraded)."""
    origin = settings.store.origin_root
    origin.mkdir(parents=True)
    older = record_bytes(STORE_FORMAT, written_by="imgwarm 0.2.9")
    (origin / FORMAT_RECORD).write_bytes(older)
    env = settings_env(settings)
    assert run_cli("optimize", _jpeg(tmp_path / "one.jpg"), env=env).exit_code == 0
    assert run_cli("delete", tmp_path / "one.jpg", env=env).exit_code == 0
    assert run_cli("gc", "--grace", "0", env=env).exit_code == 0
    assert (origin / FORMAT_RECORD).read_bytes() == older


@pytest.mark.parametrize("prefix", ["", "site/"])
def test_s3_the_first_write_leaves_the_record_at_the_prefix(s3_server: S3Server,
                                                            prefix: str) -> None:
    bucket = s3_server.new_bucket()
    settings = _s3_settings(s3_server, bucket, prefix)
    s3_server.client.put_object(Bucket=bucket, Key=prefix + "up/one.jpg",
                                Body=bytes(photo(320, 200).jpegsave_buffer()))
    stores = Stores.s3(settings.store)
    optimize_key("up/one.jpg", settings=settings, stores=stores)
    got = s3_server.client.get_object(Bucket=bucket, Key=prefix + FORMAT_RECORD)
    assert json.loads(got["Body"].read()) == CURRENT
    assert got["ContentType"] == "application/json"
    assert got["CacheControl"] == "no-cache"


def test_s3_a_record_is_created_only_where_none_is(s3_server: S3Server) -> None:
    """The put is conditional (If-None-Match: *): the second writer does not replace it."""
    from imgwarm.store.s3 import S3Store

    bucket = s3_server.new_bucket()
    raw = S3Store(s3_server.client, bucket, "p/")
    assert raw.create(FORMAT_RECORD, record_bytes(NEWER)) is True
    assert raw.create(FORMAT_RECORD, record_bytes(STORE_FORMAT)) is False
    stored = s3_server.client.get_object(Bucket=bucket, Key="p/" + FORMAT_RECORD)
    assert json.loads(stored["Body"].read())["format"] == NEWER


RACER = """
import json, os, sys, time
from pathlib import Path
from imgwarm.store.format import FORMAT_RECORD, FormatGate, FormatRecord
kind, where, name, start = sys.argv[1:5]
if kind == "local":
    from imgwarm.store.local import LocalStore
    raw = LocalStore(Path(where))
else:
    import boto3
    from imgwarm.store.s3 import S3Store
    endpoint, bucket = where.split("|")
    raw = S3Store(boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"), bucket)
while not os.path.exists(start):
    time.sleep(0.001)
mine = FormatRecord(1, 1, name)
created = raw.create(FORMAT_RECORD, mine.to_json())
seen = FormatGate(raw, "origin").check()
print(json.dumps({"created": created, "seen": seen.written_by}))
"""
RACERS = 6


def _race(kind: str, where: str, tmp_path: Path, env: dict[str, str] | None = None
          ) -> list[dict[str, Any]]:
    start = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, kind, where, f"racer {n}",
                                str(start)], stdout=subprocess.PIPE, text=True, env=env)
              for n in range(RACERS)]
    time.sleep(1.5)  # every racer imported and waiting on the start file
    start.touch()
    outputs = [racer.communicate(timeout=60)[0] for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    return [json.loads(out) for out in outputs]


def test_processes_racing_on_a_fresh_local_store_end_with_one_record(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    found = _race("local", str(origin), tmp_path)
    winners = [r for r in found if r["created"]]
    assert len(winners) == 1
    stored = json.loads((origin / FORMAT_RECORD).read_bytes())
    assert stored == {"format": 1, "readable_by": 1, "written_by": winners[0]["seen"]}
    assert {r["seen"] for r in found} == {stored["written_by"]}  # all read the one record
    assert [p.name for p in origin.iterdir()] == [FORMAT_RECORD]  # no temp file left


def test_processes_racing_on_a_fresh_bucket_end_with_one_record(s3_server: S3Server,
                                                                tmp_path: Path) -> None:
    import os

    bucket = s3_server.new_bucket()
    found = _race("s3", f"{s3_server.endpoint}|{bucket}", tmp_path, env=dict(os.environ))
    winners = [r for r in found if r["created"]]
    assert len(winners) == 1
    body = s3_server.client.get_object(Bucket=bucket, Key=FORMAT_RECORD)["Body"].read()
    stored = json.loads(body)
    assert stored["written_by"] == winners[0]["seen"]
    assert {r["seen"] for r in found} == {stored["written_by"]}
    assert s3_server.keys(bucket) == [FORMAT_RECORD]


def test_the_record_is_read_once_a_command(settings: Settings, tmp_path: Path) -> None:
    """A batch of files asks the gate for every read and write, and the record is read once
    (and written once: a fresh store)."""
    sources = [_jpeg(tmp_path / "in" / f"{n}.jpg", seed=n) for n in range(4)]
    stores = Stores.local(settings.store)
    results = list(run_batch(sources, settings, stores=stores))
    assert all(r.manifest is not None for r in results)
    assert stores.gate is not None
    assert stores.gate.reads == 2  # none there, then the one written, read back


def test_s3_the_check_costs_one_get_a_command(s3_server: S3Server) -> None:
    """On S3 the record costs one GET a command (plus its HEAD and PUT on a fresh store),
    counted as the requests boto3 really sends, whatever the batch holds."""
    bucket = s3_server.new_bucket()
    settings = _s3_settings(s3_server, bucket)
    for n in range(3):
        s3_server.client.put_object(Bucket=bucket, Key=f"up/{n}.jpg",
                                    Body=bytes(photo(320, 200, seed=n).jpegsave_buffer()))

    def requests_for_the_record() -> list[str]:
        sent: list[str] = []
        stores = Stores.s3(settings.store)
        assert stores.gate is not None
        client = stores.gate.store.client  # type: ignore[attr-defined]
        origin_client = stores.origin.client  # type: ignore[attr-defined]
        assert client is origin_client  # one client: counted in one place

        def seen(request: Any, **_: Any) -> None:
            if request.url.split("?")[0].endswith(FORMAT_RECORD):
                sent.append(request.method)

        client.meta.events.register("before-send.s3", seen)
        for n in range(3):
            optimize_key(f"up/{n}.jpg", settings=settings, stores=stores)
        return sent

    assert sorted(requests_for_the_record()) == ["GET", "GET", "HEAD", "PUT"]  # a fresh store
    assert requests_for_the_record() == ["GET"]  # the next command: one GET


def test_the_record_is_read_again_after_refresh(tmp_path: Path) -> None:
    """A long-running process (a worker, warm --follow) sees a store marked newer under it
    within REFRESH seconds; a refusal is not kept (the next look reads again)."""
    origin = tmp_path / "origin"
    origin.mkdir()
    now = [1000.0]
    gate = FormatGate(LocalStore(origin), f"origin {origin}", clock=lambda: now[0])
    assert gate.check(WRITE).format == STORE_FORMAT
    mark_local(origin, NEWER)
    now[0] += REFRESH - 1
    assert gate.check(WRITE).format == STORE_FORMAT  # kept
    now[0] += 1
    with pytest.raises(FormatTooNew, match="^" + refusal(f"origin {origin}") + "$"):
        gate.check(WRITE)
    mark_local(origin, STORE_FORMAT)
    assert gate.check(WRITE).format == STORE_FORMAT  # no refusal kept
    assert gate.reads == 4


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'{"format": "2"}', b'{"format": 0}',
                                  b'{"format": true}', b'{"format": 1, "readable_by": 2}',
                                  b"x" * 5000])
def test_a_damaged_record_stops_every_command(settings: Settings, run_cli: Cli,
                                              tmp_path: Path, body: bytes) -> None:
    """Never guessed at: no read and no write, one line naming the record."""
    origin = settings.store.origin_root
    origin.mkdir(parents=True)
    (origin / FORMAT_RECORD).write_bytes(body)
    for args in (("optimize", _jpeg(tmp_path / "one.jpg")), ("fsck",)):
        result = run_cli(*args, env=settings_env(settings))
        assert result.exit_code == 1
        (line,) = result.stderr.splitlines()
        assert f"{origin / FORMAT_RECORD} is not a format record" in line
    assert sorted(p.name for p in origin.iterdir()) == [FORMAT_RECORD]
