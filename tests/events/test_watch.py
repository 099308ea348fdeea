"""`imgwarm watch`, a real process on a real folder: complete files are made once (never half
written), temporary and hidden names are passed over until renamed, a removed file is taken
down, a bad file costs its line alone, and a restart catches up with what changed meanwhile."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imgwarm.config import Settings
from imgwarm.events.out import parse
from imgwarm.manifest import Manifest, Tombstone
from imgwarm.pipeline.budget import MemoryBudget
from imgwarm.store import local_key
from tests.support.queues import FAST, Queue
from tests.support.servers import IMGWARM, RedisServer, clean_env, wait_for
from tests.support.watching import BUDGET, Watching, budget, check_made, corpus, in_hand, record

PHOTO = "DSCN0010.jpg"  # a camera photo; the others below are small, to keep the tests quick
SMALL = ["cat.jpg", "concert.jpg", "02.jpg", "BlueSquare.jpg"]


@pytest.fixture
def folder(settings: Settings) -> Path:
    path = settings.store.origin_root.parent / "uploads"
    path.mkdir()
    return path


@pytest.fixture
def watching(folder: Path, settings: Settings) -> Any:
    watcher = Watching(folder, settings)
    yield watcher
    if watcher.process.poll() is None:
        watcher.stop()


def test_the_kernel_says_when_a_writer_closes_a_file(tmp_path: Path) -> None:
    """What the watcher stands on: watchdog's inotify observer gives a close-write event,
    after the last write, and a move from outside as a move with no source."""
    from watchdog.events import FileClosedEvent, FileMovedEvent, FileSystemEvent
    from watchdog.events import FileSystemEventHandler as Handler
    from watchdog.observers.inotify import InotifyObserver

    seen: list[tuple[str, str, str]] = []

    class Seen(Handler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            seen.append((type(event).__name__, os.fsdecode(event.src_path),
                         os.fsdecode(event.dest_path)))

    (tmp_path / "in").mkdir()
    observer = InotifyObserver(generate_full_events=True)
    observer.schedule(Seen(), str(tmp_path / "in"), recursive=True,
                      event_filter=[FileClosedEvent, FileMovedEvent])
    observer.start()
    try:
        path = tmp_path / "in" / "a.jpg"
        with path.open("wb") as handle:
            handle.write(b"first")
            handle.flush()
            time.sleep(0.2)
            assert seen == []  # written, not closed
            handle.write(b"second")
        wait_for(lambda: ("FileClosedEvent", str(path), "") in seen, "the close-write event")
        (tmp_path / "b.jpg").write_bytes(b"x")
        os.rename(tmp_path / "b.jpg", tmp_path / "in" / "b.jpg")
        wait_for(lambda: ("FileMovedEvent", "", str(tmp_path / "in" / "b.jpg")) in seen,
                 "the move in")
    finally:
        observer.stop()
        observer.join()


def test_a_photo_copied_in_is_made_once(watching: Watching, folder: Path,
                                        settings: Settings) -> None:
    target = folder / "sub" / "photo.jpg"
    target.parent.mkdir()
    shutil.copy(corpus(PHOTO), target)
    watching.wait(target, "made")
    manifest = check_made(settings, target, corpus(PHOTO).read_bytes())
    with Image.open(corpus(PHOTO)) as original:
        assert max(manifest.width, manifest.height) == max(original.size)
    watching.settled()
    assert len(watching.of(target, "made")) == 1


def test_a_file_written_slowly_is_made_once_after_its_close(
        watching: Watching, folder: Path, settings: Settings) -> None:
    data = corpus(PHOTO).read_bytes()
    target = folder / "slow.jpg"
    with target.open("wb") as handle:
        for start in range(0, len(data), len(data) // 3 + 1):
            handle.write(data[start:start + len(data) // 3 + 1])
            handle.flush()
            time.sleep(0.5)
        assert record(settings, target) is None  # written for 1.5 s: never read while open
    watching.wait(target, "made")
    check_made(settings, target, data)
    watching.settled()
    assert len(watching.of(target, "made")) == 1


def test_closes_in_quick_succession_make_it_once_with_the_last_bytes(
        folder: Path, settings: Settings) -> None:
    watching = Watching(folder, settings, "--settle", "3")  # (a loaded machine's writes)
    try:
        target = folder / "again.jpg"
        for name in SMALL:
            target.write_bytes(corpus(name).read_bytes())
        watching.wait(target, "made")
        check_made(settings, target, corpus(SMALL[-1]).read_bytes())
        watching.settled()
        assert len(watching.of(target, "made")) == 1
    finally:
        watching.stop()


def test_a_file_moved_in_from_outside_is_made(watching: Watching, folder: Path,
                                              settings: Settings) -> None:
    outside = settings.store.origin_root.parent / "elsewhere.jpg"
    shutil.copy(corpus("cat.jpg"), outside)
    target = folder / "moved.jpg"
    os.rename(outside, target)
    watching.wait(target, "made")
    check_made(settings, target, corpus("cat.jpg").read_bytes())


def test_hidden_and_partial_names_wait_for_their_final_name(
        watching: Watching, folder: Path, settings: Settings) -> None:
    partial, hidden = folder / "x.jpg.part", folder / ".upload.jpg.a1B2c3"
    shutil.copy(corpus("cat.jpg"), partial)
    shutil.copy(corpus("concert.jpg"), hidden)
    watching.settled()
    assert record(settings, partial) is None and record(settings, hidden) is None
    assert not watching.of(partial, "made") and not watching.of(hidden, "made")
    final, shown = folder / "x.jpg", folder / "upload.jpg"
    os.rename(partial, final)
    os.rename(hidden, shown)
    watching.wait(final, "made")
    watching.wait(shown, "made")
    check_made(settings, final, corpus("cat.jpg").read_bytes())
    check_made(settings, shown, corpus("concert.jpg").read_bytes())


def test_a_removed_file_is_taken_down(watching: Watching, folder: Path,
                                      settings: Settings) -> None:
    target = folder / "gone.jpg"
    shutil.copy(corpus("concert.jpg"), target)
    watching.wait(target, "made")
    variants = [settings.store.origin_root / v.path
                for v in check_made(settings, target, target.read_bytes()).variants]
    target.unlink()
    watching.wait(target, "deleted")
    tomb = record(settings, target)
    assert isinstance(tomb, Tombstone)
    assert not any(p.exists() for p in variants)
    never = folder / "never.jpg"  # an empty file is not made; removing it says nothing
    never.touch()
    watching.settled()
    never.unlink()
    watching.settled()
    assert [e["event"] for e in watching.events() if "sentinel" not in str(e)] == \
        ["made", "deleted"]


def test_a_folder_moved_in_renamed_and_moved_out(watching: Watching, folder: Path,
                                                 settings: Settings) -> None:
    outside = settings.store.origin_root.parent / "album"
    outside.mkdir()
    for name in SMALL[:2]:
        shutil.copy(corpus(name), outside / name)
    os.rename(outside, folder / "album")
    for name in SMALL[:2]:
        watching.wait(folder / "album" / name, "made")
    os.rename(folder / "album", folder / "renamed")
    for name in SMALL[:2]:
        watching.wait(folder / "renamed" / name, "made")
        watching.wait(folder / "album" / name, "deleted")
        (old,) = watching.of(folder / "album" / name, "deleted")
        assert old["removed"] == [] and old["kept"]  # made at the new name first: kept
        check_made(settings, folder / "renamed" / name, corpus(name).read_bytes())
    os.rename(folder / "renamed", outside)
    for name in SMALL[:2]:
        watching.wait(folder / "renamed" / name, "deleted")
        assert isinstance(record(settings, folder / "renamed" / name), Tombstone)
    slugs = tuple(f"{Path(name).stem}." for name in SMALL[:2])
    assert not [p for p in settings.store.origin_root.rglob("*") if p.name.startswith(slugs)]


def test_a_bad_file_is_one_line_and_the_watcher_goes_on(folder: Path,
                                                        settings: Settings) -> None:
    watcher = Watching(folder, settings, as_json=False)
    try:
        bad = folder / "bad.jpg"
        shutil.copy(corpus("truncated.jpg"), bad)
        wait_for(lambda: "bad.jpg" in watcher.stderr(), "the bad file's line", timeout=60)
        good = folder / "good.jpg"
        shutil.copy(corpus("cat.jpg"), good)
        wait_for(lambda: "good.jpg" in watcher.stdout(), "the next file made", timeout=60)
        lines = [line for line in watcher.stderr().splitlines() if "bad.jpg" in line]
        assert len(lines) == 1 and lines[0].startswith("FAILED"), watcher.stderr()
        assert "Traceback" not in watcher.stderr()
        check_made(settings, good, corpus("cat.jpg").read_bytes())
        assert watcher.process.poll() is None
    finally:
        watcher.stop()


def test_sigterm_finishes_the_file_in_hand(folder: Path, settings: Settings) -> None:
    budget_file, env = budget(settings)
    watcher = Watching(folder, settings, env=env)
    target = folder / "photo.jpg"
    with MemoryBudget(BUDGET, path=budget_file).reserve(BUDGET):
        shutil.copy(corpus(PHOTO), target)
        in_hand(watcher, budget_file)
        watcher.process.send_signal(signal.SIGTERM)
    assert watcher.process.wait(60) == 0, watcher.stderr()
    assert len(watcher.of(target, "made")) == 1
    check_made(settings, target, corpus(PHOTO).read_bytes())


def test_a_decoder_crash_fails_that_file_alone(folder: Path, settings: Settings) -> None:
    budget_file, env = budget(settings)
    watcher = Watching(folder, settings, env=env)
    try:
        crashed, good = folder / "crashed.jpg", folder / "good.jpg"
        with MemoryBudget(BUDGET, path=budget_file).reserve(BUDGET):
            shutil.copy(corpus(PHOTO), crashed)
            os.kill(in_hand(watcher, budget_file), signal.SIGSEGV)
            watcher.wait(crashed, "failed")
        (failure,) = watcher.of(crashed, "failed")
        assert failure["error"] == f"{crashed}: the decoder crashed on this file " \
            "(signal 11, SIGSEGV)"
        assert record(settings, crashed) is None
        shutil.copy(corpus("cat.jpg"), good)
        watcher.wait(good, "made")
        check_made(settings, good, corpus("cat.jpg").read_bytes())
    finally:
        watcher.stop()


def test_a_restart_catches_up_with_what_changed_while_stopped(
        watching: Watching, folder: Path, settings: Settings) -> None:
    kept, changed, removed = (folder / n for n in ("kept.jpg", "changed.jpg", "removed.jpg"))
    for path, name in ((kept, "cat.jpg"), (changed, "concert.jpg"), (removed, "02.jpg")):
        shutil.copy(corpus(name), path)
        watching.wait(path, "made")
    watching.stop()
    added = folder / "added.jpg"
    shutil.copy(corpus("BlueSquare.jpg"), added)
    changed.write_bytes(corpus("Pentax_K10D.jpg").read_bytes())
    removed.unlink()
    os.chmod(kept, 0o600)  # a newer ctime, the same bytes: nothing to make

    again = Watching(folder, settings)
    try:
        again.wait(added, "made")
        again.wait(changed, "made")
        again.wait(removed, "deleted")
        check_made(settings, added, corpus("BlueSquare.jpg").read_bytes())
        check_made(settings, changed, corpus("Pentax_K10D.jpg").read_bytes())
        assert isinstance(record(settings, removed), Tombstone)
        again.settled()
        assert not again.of(kept, "made")  # unchanged: not read again
    finally:
        again.stop()
    once = Watching(folder, settings, "--once")  # nothing changed since: nothing to do
    assert once.process.wait(60) == 0, once.stderr()
    assert once.events() == []


def test_each_publish_failure_and_takedown_is_added_to_the_events_stream(
        folder: Path, settings: Settings, redis_server: RedisServer) -> None:
    stream = f"imgwarm:events:{uuid.uuid4().hex}"
    watcher = Watching(folder, settings, env={"IMGWARM_EVENTS_REDIS_URL": redis_server.url,
                                              "IMGWARM_EVENTS_STREAM": stream})
    try:
        good, bad = folder / "good.jpg", folder / "bad.jpg"
        shutil.copy(corpus("cat.jpg"), good)
        watcher.wait(good, "made")
        good.unlink()
        watcher.wait(good, "deleted")
        shutil.copy(corpus("truncated.jpg"), bad)
        watcher.wait(bad, "failed")
    finally:
        watcher.stop()
    events = [parse(fields) for _, fields in redis_server.client.xrange(stream)]
    assert [(e["type"], e["key"]) for e in events if e] == [
        ("published", local_key(good)), ("deleted", local_key(good)), ("failed", local_key(bad))]
    made, gone = events[0], events[1]
    assert made and gone and sorted(v["path"] for v in made["variants"]) == sorted(gone["removed"])
    assert all(v["width"] > 0 and v["bytes"] > 0 for v in made["variants"])


def test_a_watched_folder_removed_takes_its_files_down_and_ends_the_watcher(
        watching: Watching, folder: Path, settings: Settings) -> None:
    target = folder / "sub" / "photo.jpg"
    target.parent.mkdir()
    shutil.copy(corpus("cat.jpg"), target)
    watching.wait(target, "made")
    shutil.rmtree(folder)
    assert watching.process.wait(60) == 1
    assert isinstance(record(settings, target), Tombstone)
    assert watching.stderr().splitlines()[-1] == \
        f"watch FAILED: watch: {folder} was removed: nothing left to watch"


def test_with_queue_the_workers_make_and_take_down(settings: Settings,
                                                   redis_server: RedisServer) -> None:
    queue = Queue(settings.store.origin_root.parent, redis_server, None, **FAST)
    uploads = settings.store.origin_root / "uploads"
    uploads.mkdir(parents=True)
    watcher = None
    try:
        queue.worker()
        watcher = Watching(uploads, settings, "--queue", env=queue.env)
        target, key = uploads / "bike.jpg", "uploads/bike.jpg"
        shutil.copy(corpus("cat.jpg"), target)
        manifests = queue.stores().manifests
        wait_for(lambda: isinstance(manifests.read(key), Manifest), "the worker's manifest",
                 timeout=60)
        manifest = manifests.read(key)
        assert isinstance(manifest, Manifest)
        assert manifest.source_sha256 == hashlib.sha256(target.read_bytes()).hexdigest()
        for variant in manifest.variants:
            with Image.open(settings.store.origin_root / variant.path) as image:
                assert image.size == (variant.width, variant.height)
        target.unlink()
        wait_for(lambda: isinstance(manifests.read(key), Tombstone), "the worker's takedown",
                 timeout=60)
        # the tombstone goes first, the variants after it (lifecycle/delete.py): wait for them
        gone = [settings.store.origin_root / v.path for v in manifest.variants]
        wait_for(lambda: not any(path.exists() for path in gone), "the variants to go",
                 timeout=60)
        assert [(e["event"], e["key"]) for e in watcher.events()] == [
            ("queued", key), ("delete queued", key)]
    finally:
        if watcher is not None:
            watcher.stop()
        queue.stop()


def test_imgwarm_s_own_roots_are_refused(settings: Settings) -> None:
    settings.store.manifest_root.mkdir(parents=True)
    done = subprocess.run(
        [str(IMGWARM), "watch", str(settings.store.manifest_root)], capture_output=True,
        text=True, timeout=60, env=clean_env(
            IMGWARM_ORIGIN_ROOT=str(settings.store.origin_root),
            IMGWARM_MANIFEST_ROOT=str(settings.store.manifest_root)))
    assert done.returncode == 2
    assert "manifest_root" in done.stderr and "Traceback" not in done.stderr
