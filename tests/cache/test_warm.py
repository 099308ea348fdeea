"""warm against real tiers (a tmpfs mounted for the test), real access logs and real origins."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imgwarm.cache import logs
from imgwarm.cache.warm import warm
from imgwarm.config import Settings
from imgwarm.exceptions import SettingsError
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.logs import log_line, requests, write_log
from tests.support.servers import clean_env, wait_for
from tests.support.sites import Site, halves, make_site, synthetic, thumbnails
from tests.support.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.slow

PAGE = 4096


def pages(size: int) -> int:
    return -(-size // PAGE) * PAGE


def whole(root: Path, key: str) -> bool:
    data = (root / key).read_bytes()
    return hashlib.sha256(data).hexdigest().startswith(Path(key).name.split(".")[-2])


def variants(site: Site) -> dict[str, int]:
    return {v.path: v.bytes for m in site.manifests() for v in m.variants}


def test_first_run_places_every_variant_on_nvme_and_the_thumbnails_in_ram(site: Site) -> None:
    report = site.warm()
    everything, small = variants(site), thumbnails(site)
    assert site.in_tier("nvme") == set(everything)
    assert site.in_tier("ram") == set(small) and set(small) != set(everything)
    assert report.nvme.copied == len(everything) and report.ram.copied == len(small)
    assert report.nvme.copied_bytes == sum(everything.values())
    for key in everything:
        assert whole(site.settings.cache.nvme_root, key)


def test_placement_follows_the_ranking_within_the_budget(site: Site) -> None:
    small = thumbnails(site)
    keys = sorted(small)
    hits = {key: (i * 37) % 11 * 10 for i, key in enumerate(keys)}  # 0..100 requests each
    log = site.root / "access.log"
    now = time.time()
    write_log(log, requests(hits, now))
    budget = pages(sum(small.values())) // 3
    site.settings = site.settings.updated(ram_budget=str(budget), access_logs=str(log))
    report = site.warm(now=now)
    # Expected, worked out here: every thumbnail is worth its requests plus the prior of one
    # request (none had traffic when they came), per page of tmpfs; greedy within the budget.
    ranked = sorted(keys, key=lambda k: (-(hits[k] + 1) / pages(small[k]), k))
    expected, left = set(), budget
    for key in ranked:
        if pages(small[key]) <= left:
            expected.add(key)
            left -= pages(small[key])
    assert site.in_tier("ram") == expected
    assert sum(pages(small[k]) for k in site.in_tier("ram")) <= budget
    assert report.requests == sum(hits.values()) == report.requests_to_variants
    assert report.ram_hit_share is not None and report.ram_hit_share > 0.5


def test_a_rerun_with_nothing_new_copies_nothing_and_reads_no_old_line(site: Site) -> None:
    log = site.root / "access.log"
    write_log(log, requests(dict.fromkeys(thumbnails(site), 3), time.time()))
    site.settings = site.settings.updated(access_logs=str(log))
    first = site.warm()
    assert first.log_lines == 3 * len(thumbnails(site))
    again = site.warm()
    assert (again.ram.copied, again.nvme.copied, again.ram.evicted, again.nvme.evicted) == (
        0, 0, 0, 0)
    assert (again.log_lines, again.sources) == (0, 0)
    assert again.ram.held == first.ram.held


def test_a_changed_log_evicts_and_promotes(site: Site) -> None:
    sizes = thumbnails(site)
    first, second = halves(site)
    log = site.root / "access.log"
    then = time.time() - 3 * 86400
    write_log(log, requests(dict.fromkeys(first, 20), then))
    site.settings = site.settings.updated(
        access_logs=str(log), ram_budget=str(sum(pages(sizes[k]) for k in first)))
    site.warm(now=then)
    assert site.in_tier("ram") == set(first)
    write_log(log, requests(dict.fromkeys(second, 20), then + 3 * 86400), append=True)
    site.settings = site.settings.updated(ram_budget=str(sum(pages(sizes[k]) for k in second)))
    report = site.warm(now=then + 3 * 86400)
    assert site.in_tier("ram") == set(second)  # three half-lives later the first cooled
    assert report.ram.evicted == len(first) and report.ram.copied == len(second)
    assert set(first) <= site.in_tier("nvme")  # out of RAM, still on NVMe


def test_a_new_upload_is_placed_in_ram_before_any_request(site: Site) -> None:
    hot, _ = halves(site)
    log = site.root / "access.log"
    now = time.time()
    write_log(log, requests({k: 10 + i for i, k in enumerate(hot)}, now - 3600))
    sizes = thumbnails(site)
    site.settings = site.settings.updated(access_logs=str(log),
                                          ram_budget=str(sum(pages(sizes[k]) for k in hot)))
    site.warm(now=now - 60)
    assert site.in_tier("ram") == set(hot)
    new = site.add("new-listing.jpg", seed=99)
    report = site.warm(now=now)
    fresh = {v.path for v in new.variants if v.width <= 640}
    assert fresh <= site.in_tier("ram")  # placed before its first visitor
    assert report.sources == 1  # read from the journal, not a full listing


def test_the_ram_tier_must_be_on_tmpfs(settings: Settings, tmp_path: Path, run_cli: Cli) -> None:
    site = make_site(settings, tmp_path, tmp_path, count=1)
    disk = tmp_path / "not-tmpfs"
    cli = run_cli
    done = cli("warm", "--ram-root", disk, env=site.env())
    assert done.exit_code == 2
    assert "not tmpfs: it would not be in RAM" in done.stderr
    assert not any(disk.rglob("*.webp"))
    done = cli("warm", "--ram-root", disk, "--allow-non-tmpfs", env=site.env())
    assert done.exit_code == 0, done.output
    assert any(disk.rglob("*.webp"))


def test_a_full_tmpfs_stops_ram_alone_with_no_partial_file(settings: Settings,
                                                           tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "tiny", "8m", inodes=12) as tiny:
        site = make_site(settings, tmp_path, tiny, count=6)
        report = site.warm()
        assert report.ram.stopped is not None and "full" in report.ram.stopped
        assert site.in_tier("nvme") == set(variants(site))  # NVMe went on
        placed = site.in_tier("ram")
        assert 0 < len(placed) < len(thumbnails(site))
        ram_root = site.settings.cache.ram_root
        assert all(whole(ram_root, key) for key in placed)
        assert not [p for p in ram_root.rglob(".tmp-*")]
        assert report.ram.held == len(placed)


def test_a_killed_run_then_a_normal_run_ends_consistent(settings: Settings, tmp_path: Path,
                                                        ram: Path) -> None:
    site = make_site(settings, tmp_path, ram, count=0)
    synthetic(site, sources=1800, per_source=3)  # batches left after the first is placed
    exe = Path(sys.executable).with_name("imgwarm")
    env = clean_env(**site.env())
    run = subprocess.Popen([str(exe), "warm"], env=env, cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index = site.settings.cache.cache_state / "index.sqlite"

    def some_placed() -> bool:
        try:
            with sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=1) as db:
                return bool(db.execute(
                    "SELECT count(*) FROM variants WHERE nvme = 'placed'").fetchone()[0])
        except sqlite3.Error:
            return False

    wait_for(some_placed, "a first batch placed")
    run.send_signal(signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL
    partway = len(site.in_tier("nvme"))
    assert 0 < partway < len(variants(site))  # killed in the middle
    site.warm()
    everything = variants(site)
    assert site.in_tier("nvme") == set(everything)
    assert all(whole(site.settings.cache.nvme_root, k) for k in everything)
    with sqlite3.connect(index) as db:
        states = dict(db.execute("SELECT path, nvme FROM variants"))
    assert set(states.values()) == {"placed"}  # nothing unsettled is left
    assert site.in_tier("ram") == {k for k, (state) in _ram_states(index).items()
                                   if state == "placed"}


def _ram_states(index: Path) -> dict[str, str]:
    with sqlite3.connect(index) as db:
        return dict(db.execute("SELECT path, ram FROM variants WHERE ram IS NOT NULL"))


def test_an_emptied_ram_tier_is_found_and_filled_again(site: Site) -> None:
    site.warm()
    before = site.in_tier("ram")
    for item in site.settings.cache.ram_root.iterdir():  # as a reboot empties a tmpfs
        subprocess.run(["rm", "-rf", str(item)], check=True)
    report = site.warm()
    assert report.ram.reset and report.ram.copied == len(before)
    assert site.in_tier("ram") == before


def test_full_repairs_files_deleted_or_damaged_by_hand(site: Site) -> None:
    site.warm()
    nvme = site.settings.cache.nvme_root
    keys = sorted(site.in_tier("nvme"))
    (nvme / keys[0]).unlink()
    damaged = nvme / keys[1]
    damaged.write_bytes(bytes(len(damaged.read_bytes())))  # same size, other bytes
    stray = nvme / "00" / "00" / "00" / "stray.0123456789abcdef.webp"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"not ours")
    assert site.warm().nvme.copied == 0  # a normal run trusts its index
    report = site.warm(full=True)
    assert report.nvme.repaired == 2 and report.nvme.copied == 2
    # a file warm never wrote is not its to remove, whatever its name (docs/architecture.md, I3)
    assert report.nvme.foreign == 1 and stray.read_bytes() == b"not ours"
    assert site.in_tier("nvme") - {str(stray.relative_to(nvme))} == set(variants(site))
    assert all(whole(nvme, k) for k in keys)


def test_the_folder_bound_holds_in_both_tiers(settings: Settings, tmp_path: Path,
                                              ram: Path) -> None:
    site = make_site(settings, tmp_path, ram, count=0, max_dir_entries=16, shard_levels=3,
                     ram_max_width=16383)
    synthetic(site, sources=400, per_source=3, sizes=(300, 900))
    site.warm()
    for root in (site.settings.cache.nvme_root, site.settings.cache.ram_root):
        counts = [len(os.listdir(folder)) for folder, _, _ in os.walk(root)]
        assert max(counts) <= 16
        assert sum(1 for p in root.rglob("*.webp")) == 1200


def test_hostile_log_lines_are_ignored_and_counted(site: Site) -> None:
    now = time.time()
    good = sorted(thumbnails(site))[0]
    lines = [
        log_line("/../../etc/passwd", now), log_line("/%2e%2e/%2e%2e/etc/passwd", now),
        log_line("/a/..%2f..%2fb.webp", now), log_line("/.imgwarm-tier", now),
        log_line(f"/{good}", now), log_line(f"/{good}?w=1", now),
        log_line(f"/{good}", now, status=404), log_line(f"/{good}", now, method="POST"),
        "x" * 200_000 + "\n", "\x00\xff\xfe binary garbage \x1b[2J\n",
        "not the combined format at all\n", '1.2.3.4 - - [bad time] "GET" 200\n',
    ]
    log = site.root / "access.log"
    write_log(log, lines)
    site.settings = site.settings.updated(access_logs=str(log))
    report = site.warm(now=now)
    assert report.malformed_lines == 4
    assert report.unsafe_paths == 4  # all kinds of .. and the hidden name: never followed
    assert report.requests == 6 and report.requests_to_variants == 2  # the query is dropped
    assert not (site.settings.cache.ram_root / "etc").exists()


def test_a_line_from_the_future_and_a_long_pause_do_not_break_the_scores(site: Site) -> None:
    now = time.time()
    good = sorted(thumbnails(site))[0]
    log = site.root / "access.log"
    write_log(log, [log_line(f"/{good}", now + 100 * 365 * 86400)])  # a clock gone wrong
    site.settings = site.settings.updated(access_logs=str(log), hot_half_life="30m")
    report = site.warm(now=now)
    assert report.requests_to_variants == 1 and report.ram_hit_share is not None
    write_log(log, [log_line(f"/{good}", now + 86400 * 365)], append=True)
    later = site.warm(now=now + 86400 * 365)  # 17,520 half-lives later: scores rescaled
    assert later.requests_to_variants == 1
    assert later.ram_hit_share is not None and 0 < later.ram_hit_share <= 1


def test_a_source_key_that_is_not_utf8_is_indexed(site: Site) -> None:
    from imgwarm.cache.index import Index

    index = Index(site.root / "odd.sqlite")
    variants = site.manifests()[0].variants
    assert index.set_source("uploads/bad\udcff.jpg", variants, prior=1.0) == (len(variants), 0)
    assert index.set_source("uploads/bad\udcff.jpg", variants, prior=1.0) == (0, 0)
    assert index.set_source("uploads/bad\udcff.jpg", [], prior=1.0) == (0, len(variants))
    index.close(keep=False)


def test_tiers_inside_one_another_are_refused(site: Site) -> None:
    nested = site.settings.updated(nvme_root=site.settings.store.origin_root / "nvme")
    with pytest.raises(SettingsError, match=r"nvme_root .* and origin_root .* must be apart"):
        warm(nested)
    state_inside = site.settings.updated(cache_state=site.settings.cache.nvme_root / "state")
    with pytest.raises(SettingsError, match="must be apart"):
        warm(state_inside)


def test_two_runs_on_the_same_tiers_never_interleave(site: Site, run_cli: Cli) -> None:
    state = site.settings.cache.cache_state
    state.mkdir(parents=True, exist_ok=True)
    with (state / "lock").open("a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        done = run_cli("warm", env=site.env())
    assert done.exit_code == 1
    assert "another `imgwarm warm`" in done.stderr and "did nothing" in done.stderr
    assert site.in_tier("nvme") == set()


def test_a_dry_run_changes_nothing(site: Site) -> None:
    report = site.warm(dry_run=True)
    assert report.nvme.copied == len(variants(site))  # what it would do
    assert site.in_tier("nvme") == set() and site.in_tier("ram") == set()
    real = site.warm()
    assert real.nvme.copied == len(variants(site))  # the dry run left the index untouched


@pytest.mark.parametrize(("forked", "gzipped"), [(False, False), (True, False), (True, True)],
                         ids=["parsed-here", "forked-ranges", "forked-gzip"])
def test_a_dry_run_counts_the_requests_to_the_variants_it_would_add(
        site: Site, monkeypatch: pytest.MonkeyPatch, forked: bool, gzipped: bool) -> None:
    # a first dry run commits nothing, so the index file knows none of the variants: the
    # log readers' snapshot carries them apart, in this process and in forked parsers alike
    hot, _ = halves(site)
    log = site.root / ("access.log.1.gz" if gzipped else "access.log")
    now = time.time()
    write_log(log, requests(dict.fromkeys(hot, 3), now - 600) * 40, gzipped=gzipped)
    site.settings = site.settings.updated(access_logs=str(log))
    if forked:
        monkeypatch.setattr(logs, "PARALLEL_FROM", 0)
        monkeypatch.setattr(logs, "PROCESSES", 2)
        monkeypatch.setattr(logs, "BLOCK", 4096)  # blocks for each parser
    dry = site.warm(dry_run=True, now=now)
    real = site.warm(now=now)
    assert dry.requests_to_variants == real.requests_to_variants == 3 * 40 * len(hot)
    assert dry.ram.copied == real.ram.copied


def test_variants_no_source_names_leave_both_tiers(site: Site) -> None:
    from imgwarm.pipeline.optimize import optimize_file

    site.warm()
    gone = site.manifests()[0]
    optimize_file(Path(gone.key), settings=site.settings.updated(widths="480,960"),
                  stores=Stores.for_settings(site.settings.store))  # made again: new widths
    report = site.warm()
    paths = {v.path for v in gone.variants}
    assert paths.isdisjoint(site.in_tier("nvme") | site.in_tier("ram"))
    assert report.nvme.evicted == len(paths)


def test_an_s3_origin(settings: Settings, tmp_path: Path, ram: Path,
                      s3_server: object) -> None:
    bucket = s3_server.new_bucket()  # type: ignore[attr-defined]
    site = make_site(settings, tmp_path, ram, count=3, origin="s3", s3_bucket=bucket,
                     s3_endpoint_url=s3_server.endpoint,  # type: ignore[attr-defined]
                     s3_region="us-east-1")
    report = site.warm()
    assert site.in_tier("nvme") == set(variants(site))
    assert all(whole(site.settings.cache.nvme_root, k) for k in variants(site))
    assert report.sources == 3
    site.add("later.jpg", seed=50)
    again = site.warm()
    assert again.sources == 1  # the journal's new entry alone, not a listing of the bucket
    assert site.in_tier("nvme") == set(variants(site))
    keys = set(s3_server.keys(bucket))  # type: ignore[attr-defined]
    assert all(not k.startswith(".imgwarm") for k in site.in_tier("nvme"))
    assert {k for k in keys if k.startswith(".imgwarm/")}  # manifests never go into a tier


def test_every_runs_again_and_stops_cleanly_on_ctrl_c(site: Site) -> None:
    exe = Path(sys.executable).with_name("imgwarm")
    env = clean_env(**site.env())
    run = subprocess.Popen([str(exe), "warm", "--every", "1s", "--json"], env=env,
                           cwd=site.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdout is not None
    lines = []
    for _ in range(2):  # two runs reported (a hang guard only: a run takes a second or so)
        assert select.select([run.stdout], [], [], 60)[0], "no run reported in 60 s"
        lines.append(run.stdout.readline().decode())
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert all('"nvme"' in line for line in lines), (lines, err)


def test_the_manifest_variants_are_what_warm_places(site: Site) -> None:
    """Only variant files: never originals, manifests or anything else in the origin."""
    (site.settings.store.origin_root / "uploads").mkdir(parents=True)
    (site.settings.store.origin_root / "uploads" / "original.jpg").write_bytes(b"x")
    site.warm()
    placed = site.in_tier("nvme")
    assert placed == set(variants(site))
    assert all(isinstance(m, Manifest) for m in site.manifests())


def test_warm_json_says_each_step_s_own_seconds_in_their_order(site: Site, run_cli: Cli) -> None:
    from imgwarm.cache.warm import STEPS, step_name

    done = run_cli("warm", "--json", env=site.env())
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    steps = report["steps"]
    assert list(steps) == [step_name(step) for step in STEPS]
    assert "sources.read" in steps and "copy.copy" in steps
    assert all(isinstance(s, float) and s >= 0 for s in steps.values())
    assert sum(steps.values()) <= report["seconds"]
    assert report["nvme"]["copied"] == len(variants(site))  # (a real run: it placed them)
