"""Deeply nested JSON and TOML (a pages file, a manifest record planted in the store, a config
file): refused with one line by every command that reads them, never a RecursionError; one bad
record is reported and skipped, and warm and gc --full go on with the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.lifecycle.gc import gc
from tests.support.cli import Cli
from tests.support.lifecycle import by_key, in_origin, stores
from tests.support.sites import Site

pytestmark = pytest.mark.usefixtures("ram")

DEEP_JSON = b"[" * 20_000 + b"]" * 20_000  # 40 KB: far past Python's recursion limit
DEEP_TOML = b'"/" = ' + b"[" * 20_000 + b"]" * 20_000 + b"\n"


def one_line(done: object, code: int) -> str:
    """The single line a command said on stderr (click's usage block aside)."""
    stderr = done.stderr  # type: ignore[attr-defined]
    assert done.exit_code == code, stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    said = [t for t in stderr.splitlines() if t.strip() and not t.startswith(("Usage:", "Try"))]
    assert len(said) == 1, said
    return said[0]


def test_a_planted_deep_record_is_skipped_and_the_rest_go_on(site: Site) -> None:
    found = by_key(site)
    bad, good = found["photo-0.jpg"], found["photo-1.jpg"]
    first = site.warm()
    assert first.nvme.copied == len(bad.variants) + len(good.variants)
    s = stores(site)
    s.manifests.store.write(s.manifests.key_path(bad.key), DEEP_JSON, replace=True)
    cli, env = Cli(), site.env()

    assert "no manifest" in one_line(cli("picture", bad.key, env=env), 1)
    assert "no manifest" in one_line(cli("show", bad.key, env=env), 1)
    one_line(cli("delete", bad.key, env=env), 2)  # no record: not a key it can take
    shown = cli("gallery", "--out", str(site.root / "gallery"), env=env)
    assert shown.exit_code == 0, shown.stderr  # the good one shown, the bad one skipped

    assert s.manifests.changes is not None
    s.manifests.changes.append(bad.key)  # the journal says it changed: read on its own
    following = site.warm()
    assert following.damaged_records == 1 and following.variants_dropped == 0
    assert {v.path for v in bad.variants} <= site.in_tier("nvme")

    again = site.warm(full=True)
    assert again.damaged_records == 1 and "1 damaged record(s) skipped" in again.line()
    held = site.in_tier("nvme")
    assert {v.path for v in bad.variants} <= held and {v.path for v in good.variants} <= held

    collected = gc(site.settings, grace=0.0, full=True)
    assert collected.damaged == 1 and collected.removed == 0
    assert in_origin(site, bad) == {v.path for v in bad.variants}  # its claims stood
    assert in_origin(site, good) == {v.path for v in good.variants}


@pytest.mark.parametrize(("name", "body"), [("pages.json", DEEP_JSON),
                                            ("pages.toml", DEEP_TOML)])
def test_a_deep_pages_file_is_refused_in_one_line(site: Site, name: str, body: bytes) -> None:
    pages = site.root / name
    pages.write_bytes(body)
    said = one_line(Cli()("nginx", "--pages", str(pages), "--site-root", str(site.root / "w"),
                          env=site.env()), 1)
    assert "nested more than" in said and name in said


def test_a_deep_config_file_is_refused_in_one_line(site: Site, tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_bytes(b"[cache]\nram_budget = " + b"[" * 20_000 + b"]" * 20_000 + b"\n")
    said = one_line(Cli()("--config", str(config), "warm", env=site.env()), 2)
    assert "nested more than" in said and str(config) in said


@pytest.mark.parametrize(("field", "value"), [("width", 0), ("height", -3)])
def test_a_record_with_a_size_under_one_pixel_is_damaged_not_laid_out(
        site: Site, field: str, value: int) -> None:
    """A manifest edited to 0 pixels wide once stopped `imgwarm gallery` (and the serve of a
    gallery) with a ZeroDivisionError where the page is laid out: it is a damaged record,
    skipped, and the other photos' page is written."""
    import json

    from imgwarm.manifest import parse_record

    manifest = by_key(site)["photo-0.jpg"]
    for where in (None, 0):  # the source's own size, then a variant's
        raw = json.loads(manifest.to_json())
        (raw if where is None else raw["variants"][where])[field] = value
        assert parse_record(json.dumps(raw).encode()) is None
    path = stores(site).manifests.key_path(manifest.key)
    raw = json.loads(manifest.to_json())
    raw[field] = value
    stores(site).manifests.store.write(path, json.dumps(raw).encode(), replace=True)
    done = Cli()("gallery", "--out", str(site.root / "www"), env=site.env())
    assert done.exit_code == 0, done.stderr
    page = (site.root / "www" / "site" / "index.html").read_text()
    assert by_key(site)["photo-1.jpg"].variants[0].path in page
