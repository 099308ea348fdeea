"""A rolling upgrade (issue 40): the previous release (tests/support/released.py, installed in
an environment of its own) and this imgwarm on one origin, as during every rollout.

- Side by side: in each round optimize (a source made again, twins uploaded on both), delete,
  gc (usual or full, a short grace or none) and warm run at once as processes of the real CLI
  of both versions, each version with its own cache box (and every other round the old gc
  on the new one's box, as a box whose cron'd gc is upgraded after its warm); I1-I4 are
  checked at rest after every round (tests/support/invariants.py) and each box's index
  against its tiers. Both versions must have written and removed files (counted from their
  --json reports).
- On one queue: workers and clients of both versions, each running the other's jobs.
- Upgraded in place: a store and a warm index the old version wrote are read and served by
  this one (every manifest, every placed file, nothing copied again); its first write adds
  the format record and the index gets its schema number. Then the old version meets the
  store this one wrote (its gc --full with no grace, fsck, warm, optimize): nothing named is
  lost, nothing foreign in a tier, the format record kept.

The refusals of a store or index newer than the code are in tests/versions/.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from imgwarm.cache.index.schema import INDEX_SCHEMA
from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.pipeline.naming import file_name
from imgwarm.store import local_key
from imgwarm.store.format import FORMAT_RECORD, STORE_FORMAT
from tests.support.images import jpeg_with_exif, photo
from tests.support.invariants import (
    check,
    real_stores,
    records,
    snapshot,
    tier_files,
    tiers_match_index,
    verdict,
)
from tests.support.released import Released, released
from tests.support.scenes import cli_env, photo_file
from tests.support.servers import AWS, IMGWARM, RedisServer, S3Server
from tests.support.sites import Site, make_site

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
# rounds on each origin (IMGWARM_UPGRADE_ROUNDS: a longer soak, on both): on S3 a round costs
# four times as much (moto in this process answers every request), and the first two hold
# both kinds of grace
ROUNDS = {"local": 4, "s3": 2}
YIELD = "0.05"  # IMGWARM_RACE_YIELD: both versions sleep a random moment at race points
STAGGER = 1.5  # seconds: each process of a round starts within this long of the first
SEED = 40
WIDTHS = ("320,640,1280", "480,960", "320,640")
# a source made again before a round with one of these (not its widths): it drops variants
DROPS = ("480,960", "320,640", "320,960")
BUSY = "another `imgwarm warm`"  # gc's part in the tiers, or warm, found the other holding them
# (old gc's grace, new gc's grace) a round: none, short (a drop in this round may go) or the
# default week (the one round where nothing unnamed may go but a tombstone's); each version
# runs each
GRACES = (("0", None), (None, None), ("2s", "0"), (None, "2s"))


@pytest.fixture(scope="module")
def old() -> Released:
    return released()


def test_the_old_environment_imports_the_old_release(old: Released) -> None:
    """The old venv imports its own imgwarm, not this checkout's (whose editable finder sits
    in the test venv's site-packages, which the old venv reads its dependencies from)."""
    where, version = old.identity()
    assert old.venv in where.parents and version == old.version == "0.2.0", (where, version)
    import imgwarm

    assert Path(imgwarm.__file__).parent != where.parent
    done = old.run("--help")
    assert done.returncode == 0 and "Usage: imgwarm" in done.stdout, done.stderr


@dataclass
class Sides:
    """The two versions on one origin: how to run each, and each one's cache box."""

    old: Released
    boxes: dict[str, Settings]  # version -> the settings of its cache box
    logs: Path
    written: dict[str, int] = field(default_factory=lambda: {"old": 0, "new": 0})
    removed: dict[str, int] = field(default_factory=lambda: {"old": 0, "new": 0})

    def command(self, version: str, *args: str | Path) -> list[str]:
        return self.old.command(*args) if version == "old" else [str(IMGWARM), *map(str, args)]

    def env(self, version: str, box: str | None = None, **extra: str) -> dict[str, str]:
        """The environment of ``version``'s commands, on its own cache box or ``box``."""
        env = cli_env(self.boxes[box or version], **extra)
        return self.old.env(env) if version == "old" else env

    def run(self, version: str, *args: str | Path, **extra: str) -> str:
        """A command to its end (it must succeed); its standard output."""
        done = subprocess.run(self.command(version, *args), env=self.env(version, **extra),
                              cwd=self.logs, capture_output=True, text=True, timeout=180,
                              check=False)
        assert done.returncode == 0, f"{version} imgwarm {' '.join(map(str, args))} exited " \
            f"{done.returncode}: {done.stderr[-600:]}"
        return done.stdout


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def removals(name: str, out: str) -> int:
    """Files a command says it removed (origin and tiers), from its --json report."""
    count = 0
    for report in json_lines(out):
        if name == "delete":
            count += len(report.get("removed") or [])
        elif name == "gc":
            count += int(report.get("removed") or 0)
            count += sum(int(t.get("removed") or 0) for t in (report.get("tiers") or {}).values())
        elif name == "warm":
            count += sum(int(t.get("evicted") or 0) for t in report.values()
                         if isinstance(t, dict))
    return count


def box(settings: Settings, folder: Path, ram: Path, name: str) -> Settings:
    """Another cache server's settings on the same origin: its own tiers and state."""
    return settings.updated(nvme_root=folder / f"nvme-{name}", cache_state=folder / f"state-{name}",
                            ram_root=ram / f"tier-{name}-{uuid.uuid4().hex[:6]}")


def plant(settings: Settings) -> list[Path]:
    """Files warm never placed, in both tiers of a box: a dot file, another program's, and
    one of a variant's shape (another state folder's copy): I3 holds each to its bytes."""
    planted = []
    for root in (settings.cache.ram_root, settings.cache.nvme_root):
        data = os.urandom(2000)
        shaped = real_stores(settings).path_of(
            file_name("other", hashlib.sha256(data).hexdigest(), "webp", 16))
        for relative, body in ((".keep", b"x"), ("notes.txt", b"ours, not imgwarm's"),
                               (str(shaped), data)):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            planted.append(path)
    return planted


def site_for(origin: str, request: pytest.FixtureRequest, settings: Settings, folder: Path,
             ram: Path) -> Site:
    options: dict[str, object] = {}
    if origin == "s3":
        server = request.getfixturevalue("s3_server")
        options |= {"origin": "s3", "s3_bucket": server.new_bucket(),
                    "s3_endpoint_url": server.endpoint, "s3_region": "us-east-1"}
    return make_site(settings, folder, ram, count=0, **options)


def bucket(site: Site) -> Any:
    """The S3 API as the application that uploads uses it (boto3; never imgwarm's store, whose
    first write would add the format record: the store must be as the old version left it)."""
    import boto3

    store = site.settings.store
    return boto3.client("s3", endpoint_url=store.s3_endpoint_url, region_name=store.s3_region,
                        aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"])


def upload(site: Site, name: str, data: bytes) -> str:
    """An upload as each origin takes it: a file that is optimized (local), or an original
    put in the bucket (S3); the key the commands are given."""
    if site.settings.store.origin == "s3":
        bucket(site).put_object(Bucket=site.settings.store.s3_bucket, Key=f"uploads/{name}",
                                Body=data)
        return f"uploads/{name}"
    path = site.sources / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return local_key(path)


def a_photo(site: Site, name: str, seed: int) -> str:
    return upload(site, name, photo_file(site, f"made/{name}", seed=seed, width=1200,
                                         height=800).read_bytes())


def old_store(sides: Sides, site: Site) -> dict[str, str]:
    """What the old release left before the rollout: two sources and a twin of the first
    (the same bytes, fewer widths), the references built by its gc, its box warmed."""
    made = {f"photo-{i}": a_photo(site, f"photo-{i}.jpg", seed=i) for i in range(2)}
    made["twin"] = upload(site, "twin/photo-0.jpg", photo_file(
        site, "made/photo-0.jpg", seed=0, width=1200, height=800).read_bytes())
    sides.run("old", "optimize", made["photo-0"], made["photo-1"])
    sides.run("old", "optimize", made["twin"], IMGWARM_WIDTHS="320,640")
    sides.run("old", "gc", "--full")
    sides.run("old", "warm")
    return made


def original_bytes(site: Site, key: str) -> bytes:
    if site.settings.store.origin == "s3":
        body = bucket(site).get_object(Bucket=site.settings.store.s3_bucket, Key=key)["Body"]
        return bytes(body.read())
    return Path(key).read_bytes()


def short(site: Site, key: str) -> str:
    """A key as a round's line shows it (a local one from the sources folder)."""
    root = str(site.sources.resolve()) + "/"
    return key[len(root):] if key.startswith(root) else key


def widths_of(site: Site, key: str) -> str:
    record = records(real_stores(site.settings))[key]
    assert isinstance(record, Manifest)
    return ",".join(map(str, sorted({v.width for v in record.variants})))


def live(settings: Settings) -> list[str]:
    return sorted(k for k, r in records(real_stores(settings)).items() if isinstance(r, Manifest))


def wait_all(running: dict[str, subprocess.Popen[bytes]], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    for name, process in running.items():
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in running.values():
                other.kill()
            raise AssertionError(f"{name} still running after {timeout:g} s") from None


@pytest.mark.parametrize("origin", ["local", pytest.param("s3", marks=pytest.mark.integration)])
def test_two_versions_at_once(origin: str, old: Released, request: pytest.FixtureRequest,
                              settings: Settings, on_tmpfs: Path, ram: Path) -> None:
    site = site_for(origin, request, settings, on_tmpfs, ram)
    boxes = {"old": site.settings, "new": box(site.settings, on_tmpfs, ram, "new")}
    logs = on_tmpfs / "logs"
    logs.mkdir()
    sides = Sides(old, boxes, logs)
    old_store(sides, site)
    planted = plant(boxes["old"]) + plant(boxes["new"])
    tiers = [root for b in boxes.values() for root in (b.cache.ram_root, b.cache.nvme_root)]
    rnd = random.Random(SEED)
    problems: list[str] = []
    seen: set[str] = set()
    modes = []
    rounds = int(os.environ.get("IMGWARM_UPGRADE_ROUNDS", ROUNDS[origin]))
    # Twins of a photo taken down in their round: 0.2.0's full gc removes at once what a
    # takedown left to them once they drop it (its bug, fixed in 0.3.0: test_gc.py's
    # test_a_takedowns_variant_a_twin_kept_waits_the_grace_when_the_twin_drops_it), so none
    # of them is made again with other widths here (CHANGELOG: run gc --full from 0.3.0)
    spared: set[str] = set()
    for rnd_no in range(rounds):
        maker, deleter = ("old", "new") if rnd_no % 2 == 0 else ("new", "old")
        solo = a_photo(site, f"solo/s{rnd_no}.jpg", seed=100 + rnd_no)
        sources = live(site.settings)
        # Just before the round, by the round's maker: a source of its own (the delete's: it
        # alone names its variants), a source made again with other widths (its dropped
        # variants: each gc takes them with no grace, leaves them with one), and another
        # made so and back again (dropped and named again: every gc must keep them)
        dropper, back = rnd.sample([k for k in sources if k not in spared], 2)
        before_drop, had = widths_of(site, dropper), widths_of(site, back)
        drop = next(w for w in DROPS if w not in (before_drop, had))
        sides.run(maker, "optimize", solo, dropper, back, IMGWARM_WIDTHS=drop)
        sides.run(maker, "optimize", back, IMGWARM_WIDTHS=had)
        sides.written[maker] += 1
        # made again in the round: mostly the one that dropped, with its widths of before (it
        # names the dropped variants again while each gc looks at them), else another
        remake, widths = (dropper, before_drop) if rnd.random() < 0.5 else \
            (rnd.choice([k for k in sources if k != solo and k not in spared]),
             rnd.choice(WIDTHS))
        original = solo if rnd.random() < 0.75 else rnd.choice(sources)
        data = original_bytes(site, original)
        uploads = {version: upload(site, f"up/r{rnd_no}/{version}/{PurePosixPath(original).name}",
                                   data)
                   for version in ("old", "new")}  # twins of one photo from both: claims race
        if original == solo:
            spared.update(uploads.values())
        graces = GRACES[rnd_no % len(GRACES)]
        commands: dict[str, tuple[str, list[str], dict[str, str]]] = {
            "optimize-remake": (rnd.choice(["old", "new"]), ["optimize", remake],
                                {"IMGWARM_WIDTHS": widths}),
            "optimize-upload-old": ("old", ["optimize", uploads["old"]], {}),
            "optimize-upload-new": ("new", ["optimize", uploads["new"]], {}),
            "delete": (deleter, ["delete", "--json", solo], {}),
        }
        # the old gc on the new version's box every other round: a box whose warm was
        # upgraded before its cron'd gc (the index and the tiers' lock shared across versions)
        boxed = {"gc-old": "new"} if rnd_no % 2 else {}
        for version, grace in zip(("old", "new"), graces, strict=True):
            commands[f"gc-{version}"] = (version, [
                "gc", "--json", *["--full"] * (rnd.random() < 0.5),
                *(["--grace", grace] if grace else [])], {})
            commands[f"warm-{version}"] = (version, [
                "warm", "--json", *["--full"] * (rnd.random() < 0.5)], {})
        modes.append(", ".join(f"{n}: {v} {' '.join(short(site, x) for x in a[1:])}"
                               + (f" on the {boxed[n]} box" if n in boxed else "")
                               for n, (v, a, _) in commands.items()
                               if n.startswith(("gc", "delete"))))
        before = snapshot(real_stores(site.settings), tiers, planted)
        round_logs = logs / f"r{rnd_no}"
        round_logs.mkdir()
        running: dict[str, subprocess.Popen[bytes]] = {}
        begun = time.monotonic()
        for offset, name in sorted((rnd.uniform(0, STAGGER), n) for n in commands):
            time.sleep(max(0.0, begun + offset - time.monotonic()))
            version, arguments, extra = commands[name]
            with (round_logs / f"{name}.out").open("w") as out, \
                    (round_logs / f"{name}.err").open("w") as errors:
                running[name] = subprocess.Popen(  # files, not pipes: never full
                    sides.command(version, *arguments),
                    env=sides.env(version, boxed.get(name), IMGWARM_RACE_YIELD=YIELD, **extra),
                    cwd=round_logs, stdout=out, stderr=errors)
        wait_all(running)
        where = f"round {rnd_no} ({modes[-1]}; twins of {short(site, original)})"
        for name, process in running.items():
            version = commands[name][0]
            err = (round_logs / f"{name}.err").read_text(errors="replace")
            busy = name.startswith(("gc", "warm")) and BUSY in err
            if process.returncode != 0 and not busy:
                problems.append(f"{where}: {version} {name} exited {process.returncode}: "
                                f"{err[-400:]}")
            sides.removed[version] += removals(
                name.split("-")[0], (round_logs / f"{name}.out").read_text())
        found = check(real_stores(site.settings), before,
                      grace_passed=any(g is not None for g in graces))
        for version, settings_of in boxes.items():
            found += [f"{version} box: {p}" for p in tiers_match_index(settings_of)]
        now = records(real_stores(site.settings))
        for version, twin in uploads.items():  # each version wrote its twin's manifest
            if isinstance(now.get(twin), Manifest):
                sides.written[version] += 1
            else:
                found.append(f"the {version} upload {short(site, twin)} has no manifest: "
                             f"{now.get(twin)!r}")
        problems += [f"{where}: {p}" for p in found if p not in seen]
        seen.update(found)
    print(f"\n{rounds} rounds of both versions on one {origin} origin; written (sources) "
          f"{sides.written}, removed (files) {sides.removed}: " + "; ".join(modes))
    assert not problems, verdict(problems, f"upgrade-{origin}")
    raw = format_record(site.settings)  # written by the new version's first write, kept
    assert raw is not None and json.loads(raw)["format"] == STORE_FORMAT, raw
    assert all(sides.removed.values()), f"a version removed nothing: {sides.removed}"
    assert all(sides.written.values()), f"a version wrote nothing: {sides.written}"


def placed(settings: Settings) -> dict[Path, tuple[int, int]]:
    """Every file in a box's tiers: (inode, modification time): what a copy would change."""
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns)
            for root in (settings.cache.ram_root, settings.cache.nvme_root)
            for p in tier_files(root)}


def user_version(settings: Settings) -> int:
    from imgwarm.cache.lock import INDEX

    db = sqlite3.connect(f"file:{settings.cache.cache_state / INDEX}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def format_record(settings: Settings) -> bytes | None:
    return real_stores(settings).origin.read(FORMAT_RECORD)


def variants_of(settings: Settings) -> dict[str, list[str]]:
    return {k: sorted(v.path for v in r.variants)
            for k, r in records(real_stores(settings)).items() if isinstance(r, Manifest)}


@pytest.mark.parametrize("origin", ["local", pytest.param("s3", marks=pytest.mark.integration)])
def test_old_store_and_index_upgraded_in_place(origin: str, old: Released,
                                               request: pytest.FixtureRequest,
                                               settings: Settings, on_tmpfs: Path,
                                               ram: Path) -> None:
    site = site_for(origin, request, settings, on_tmpfs, ram)
    logs = on_tmpfs / "logs"
    logs.mkdir()
    sides = Sides(old, {"old": site.settings, "new": site.settings}, logs)  # one box
    made = old_store(sides, site)
    planted = plant(site.settings)
    tiers = [site.settings.cache.ram_root, site.settings.cache.nvme_root]
    by_old = variants_of(site.settings)
    assert len(by_old) == 3 and all(by_old.values()), by_old
    assert format_record(site.settings) is None, "the old release writes no format record"
    assert user_version(site.settings) == 0, "the old release's index has no schema number"
    files_before = placed(site.settings)
    assert any(p not in planted for p in files_before), "the old warm placed nothing"

    # this version reads every old manifest and serves it
    out = sides.run("new", "picture", "--json", *made.values())
    tags = {t["key"]: t["html"] for t in json_lines(out)}
    assert sorted(tags) == sorted(by_old)
    for key, paths in by_old.items():
        missing = [p for p in paths if p not in tags[key]]
        assert not missing, f"the new picture of {key} (an old manifest) lacks {missing}"
    # ...and warms from the old index: nothing copied again, nothing evicted, schema set
    report = json_lines(sides.run("new", "warm", "--json"))[-1]
    tiers_report = {n: t for n, t in report.items() if isinstance(t, dict) and "copied" in t}
    assert tiers_report and all(t["copied"] == 0 and t["evicted"] == 0
                                for t in tiers_report.values()), tiers_report
    assert placed(site.settings) == files_before, "warm copied or removed placed files"
    assert user_version(site.settings) == INDEX_SCHEMA
    assert tiers_match_index(site.settings) == []
    # reading the store (picture, warm) writes nothing in it: a cache box may hold
    # read-only credentials
    assert format_record(site.settings) is None, "a reading command wrote the format record"

    # its first write adds the format record; the old manifests stay as they were
    before = snapshot(real_stores(site.settings), tiers, planted)
    third = a_photo(site, "photo-2.jpg", seed=2)
    sides.run("new", "optimize", third)
    raw = format_record(site.settings)
    assert raw is not None, f"no {FORMAT_RECORD} after the new version's first write"
    record = json.loads(raw)
    assert record["format"] == STORE_FORMAT == 1, record
    assert str(record["written_by"]).startswith("imgwarm "), record
    assert check(real_stores(site.settings), before) == []
    now = variants_of(site.settings)
    assert {k: now[k] for k in by_old} == by_old
    sides.run("new", "gc", "--full", "--grace", "0")
    assert check(real_stores(site.settings), before, grace_passed=True) == []
    assert variants_of(site.settings) == now

    # the old version meets the store this one wrote: it must lose nothing named, nor
    # touch what is not its own
    before = snapshot(real_stores(site.settings), tiers, planted)
    seen = {}
    for args in (("gc", "--full", "--grace", "0"), ("fsck",), ("fsck", "--repair"),
                 ("warm", "--full"),
                 ("picture", "--json", third)):
        done = old.run(*args, env=sides.env("new"), cwd=logs)
        seen[" ".join(args)] = (done.returncode, done.stdout[-300:], done.stderr[-300:])
    print("\nthe old release on the new store:\n" + "\n".join(
        f"  {k}: exit {c}; {o.strip()!r} {e.strip()!r}" for k, (c, o, e) in seen.items()))
    assert format_record(site.settings) == raw, "the old version changed the format record"
    assert check(real_stores(site.settings), before, grace_passed=True) == []
    assert variants_of(site.settings) == now
    assert all(p.is_file() for p in planted)
    fourth = a_photo(site, "photo-3.jpg", seed=3)
    sides.run("old", "optimize", fourth)
    assert fourth in variants_of(site.settings)
    assert check(real_stores(site.settings), before) == []
    # ...and this version takes its box back after the old one warmed it
    sides.run("new", "warm")
    assert user_version(site.settings) == INDEX_SCHEMA
    assert tiers_match_index(site.settings) == []
    assert all(p.is_file() for p in planted)


@pytest.mark.integration
def test_workers_and_clients_of_both_versions_on_one_queue(
        old: Released, redis_server: RedisServer, s3_server: S3Server, tmp_path: Path) -> None:
    """During a rollout the queue holds jobs from clients of both versions, and workers of
    both take them: an old worker runs the jobs this version queues, and this version's
    worker those an old client queues; then both at once. Every job ends made, its manifest
    names files that are there (I1)."""
    from tests.support.queues import FAST, Queue
    from tests.support.servers import Worker

    queue = Queue(tmp_path, redis_server, s3_server, **FAST, widths="320,640")
    keys = {phase: [f"up/{phase}/p{i}.jpg" for i in range(2)] for phase in ("a", "b", "c")}
    for phase, names in keys.items():
        for i, key in enumerate(names):
            queue.put(key, jpeg_with_exif(photo(900, 600, seed=10 * ord(phase) + i), quality=85))
    try:
        older = Worker(old.env(queue.env), tmp_path / "old-worker.log", program=old.command())
        code, results = queue.cli_json("enqueue", "--wait", *keys["a"])  # this version's client
        assert code == 0 and all(r["ok"] for r in results.values()), results
        assert all(older.text().count(f"[{queue.job(k)}] succeeded") == 1 for k in keys["a"]), \
            older.text()[-2000:]
        older.stop()
        newer = queue.worker()
        done = old.run("enqueue", "--wait", "--json", *keys["b"], env=queue.env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert all(newer.text().count(f"[{queue.job(k)}] succeeded") == 1 for k in keys["b"]), \
            newer.text()[-2000:]
        older = Worker(old.env(queue.env), tmp_path / "old-worker.log", program=old.command())
        code, results = queue.cli_json("enqueue", "--wait", *keys["c"])
        assert code == 0 and all(r["ok"] for r in results.values()), results
        older.stop()
    finally:
        queue.stop()
    stores = real_stores(queue.settings())
    made = records(stores)
    assert all(isinstance(made.get(k), Manifest) for names in keys.values() for k in names), made
    assert check(stores) == []
