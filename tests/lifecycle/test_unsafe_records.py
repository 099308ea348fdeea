"""A manifest record that names an unsafe variant path (``../x.jpg``, an absolute path) is a
damaged record to every store-wide command: fsck (with and without --repair), gc --full and
warm --full count it, name it, remove nothing on its account, and go on with the rest."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.store.references import key_digest
from tests.support.cli import Cli
from tests.support.lifecycle import by_key, in_origin, stores
from tests.support.sites import Site, make_site

pytestmark = pytest.mark.usefixtures("ram")
DAY = 86400.0


class Planted(NamedTuple):
    site: Site
    bad: Manifest
    good: list[Manifest]
    record: str  # the bad record's path in the manifest store


def said(output: str, *words: str) -> bool:
    """Whether a line of ``output`` is these words (spacing aside)."""
    return any(line.split() == list(words) for line in output.splitlines())


@pytest.fixture(params=["outside", "forged line"])
def planted(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
            ram: Path) -> Planted:
    """A local site of four sources; the first one's record rewritten to name ``../x.jpg``
    (a readable file beside the origin, which nothing may touch), or a path with a newline
    and tabs that would forge a line of the store-wide passes' spool (lifecycle/spool.py:
    a good source's variant as a tombstone's); one good source's variant file removed (fsck
    must still find it) and an unnamed old variant in the origin (gc must still collect
    it)."""
    site = make_site(settings, tmp_path, ram, count=4)
    found = by_key(site)
    bad = found["photo-0.jpg"]
    good = [found[f"photo-{n}.jpg"] for n in (1, 2, 3)]
    (tmp_path / "x.jpg").write_bytes(b"outside the origin")
    s = stores(site)
    record = s.manifests.key_path(bad.key)
    raw = json.loads(s.manifests.store.read(record) or b"")
    raw["variants"][0]["path"] = "../x.jpg" if request.param == "outside" else (
        f"{bad.variants[0].path}\nt\t{good[1].variants[0].path}\t\t\"\"")
    s.manifests.store.write(record, json.dumps(raw).encode(), replace=True)
    return Planted(site, bad, good, str(record))


def test_fsck_counts_the_record_as_damaged_and_checks_the_rest(planted: Planted) -> None:
    site, bad, good, record = planted
    lost = good[0].variants[0].path
    stores(site).origin.delete(lost)
    for repair in ((), ("--repair",)):
        done = Cli()("fsck", "--json", *repair, env=site.env())
        assert "Traceback" not in done.stderr and "refusing" not in done.stderr, done.stderr
        report = json.loads(done.stdout)
        assert done.exit_code == 1, done.stderr  # damage found: left (nothing says what it held)
        assert report["damaged"]["paths"] == [record] and report["damaged"]["count"] == 1
        assert report["records"] == 3  # the three good ones read
        if not repair:
            assert report["missing"]["paths"] == [lost]
        else:  # the good source made again from its original: the rest was repaired
            assert report["missing"]["repaired"] == [lost]
    assert (site.root / "x.jpg").read_bytes() == b"outside the origin"
    # the bad source's other files stand (its claims stand), and every good one's
    assert in_origin(site, bad) == {v.path for v in bad.variants}
    for manifest in good:
        assert in_origin(site, manifest) == {v.path for v in manifest.variants}
    text = Cli()("fsck", env=site.env())
    assert text.exit_code == 1 and "Traceback" not in text.stderr, text.stderr
    assert "damaged: 1 record(s)" in text.stdout and said(text.stdout, "damaged", record)


def test_gc_full_counts_the_record_and_collects_the_rest(planted: Planted) -> None:
    site, bad, good, record = planted
    s = stores(site)
    stray = str(s.path_of("stray.0123456789abcdef.webp"))  # a variant no manifest names, old
    s.origin.write(stray, b"RIFF....WEBP")
    old = time.time() - 30 * DAY
    os.utime(s.origin.path(stray), (old, old))
    done = Cli()("gc", "--full", "--grace", "1d", "--json", env=site.env())
    assert done.exit_code == 0 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["damaged"] == 1 and report["damaged_records"] == [record]
    assert report["paths"] == [stray] and not s.origin.exists(stray)
    assert report["manifests"] == 3
    assert (site.root / "x.jpg").read_bytes() == b"outside the origin"
    assert in_origin(site, bad) == {v.path for v in bad.variants}
    digest = key_digest(bad.key)
    kept = {d for p, d, _ in s.manifests.references.claimed() if p == bad.variants[1].path}
    assert digest in kept  # its claims stand: what it named is not gc's to take
    for manifest in good:
        assert in_origin(site, manifest) == {v.path for v in manifest.variants}
    text = Cli()("gc", "--full", "--grace", "1d", env=site.env())
    assert text.exit_code == 0, text.stderr
    assert "1 damaged record(s) skipped" in text.stdout and said(text.stdout, "damaged", record)


def test_warm_full_and_delete_treat_it_as_damaged(planted: Planted) -> None:
    site, bad, good, _ = planted
    report = site.warm(full=True)
    assert report.damaged_records == 1
    held = site.in_tier("nvme")
    for manifest in good:
        assert {v.path for v in manifest.variants} <= held
    done = Cli()("delete", bad.key, env=site.env())  # no readable record: not a key it takes
    assert "Traceback" not in done.stderr and done.exit_code == 2, done.stderr
    assert (site.root / "x.jpg").read_bytes() == b"outside the origin"
    assert in_origin(site, bad) == {v.path for v in bad.variants}
