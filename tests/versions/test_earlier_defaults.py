"""A new default never re-makes a store by itself (issue 42): a manifest made with an earlier
version's default of a setting stays current (served, not made again) while that setting is
at its new default; remake_earlier_defaults makes it again, with gc's grace for the old files.

Shown with an earlier default of the widths set for the test (ImageSettings.EARLIER_DEFAULTS
lists the real ones as defaults change)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from imgwarm.config import ImageSettings, Settings
from imgwarm.config.group import ABSENT
from imgwarm.lifecycle.gc import gc
from imgwarm.manifest import Credits
from imgwarm.pipeline.optimize import optimize_file, settings_digests
from imgwarm.serve.picture import picture
from imgwarm.store import Stores
from tests.support.files import REPO, all_files

PHOTO = REPO / "tests" / "corpus" / "42_IndexError.jpg"  # 4032 px wide: every width is made
EARLIER = [300, 600, 1500]  # the widths "an earlier version" made by default


@pytest.fixture(autouse=True)
def earlier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ImageSettings, "EARLIER_DEFAULTS",
                        {"widths": (EARLIER,), "jxl_effort": (ABSENT,)})


def _source(tmp_path: Path) -> Path:
    path = tmp_path / "sources" / "photo.jpg"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(PHOTO.read_bytes())
    return path


def test_the_earlier_defaults_digests_are_current_while_the_setting_is_at_its_default() -> None:
    today = Settings()
    then = today.updated(widths=EARLIER).digest("output")
    assert then in today.digests("output") and today.digests("output")[0] != then
    # only while the setting is at its default: a user's own widths are theirs
    assert then not in today.updated(widths=[300, 600]).digests("output")
    assert today.updated(remake_earlier_defaults=True).digests("output") == [
        today.digest("output")]
    # other settings still count: a changed quality is not an earlier default
    assert then not in today.updated(webp_quality=70).digests("output")
    # a setting that did not exist then (ABSENT) is also left out of an earlier digest:
    # here jxl_effort, which counts only with jxl among the formats
    jxl = today.updated(formats="jxl,webp,jpeg")
    assert jxl.updated(widths=EARLIER).digest("output") in jxl.digests("output")
    assert len(jxl.digests("output")) == 4  # widths (2) x jxl_effort there or not (2)
    assert len(today.digests("output")) == 2  # (without jxl, jxl_effort is never there)
    assert settings_digests(today, Credits())[0] != settings_digests(
        today.updated(widths=EARLIER), Credits())[0]


def test_an_old_manifest_is_served_not_remade_until_asked(settings: Settings,
                                                          tmp_path: Path) -> None:
    source = _source(tmp_path)
    stores = Stores.local(settings.store)
    old = optimize_file(source, settings=settings.updated(widths=EARLIER), stores=stores)
    assert sorted({v.width for v in old.manifest.variants}) == EARLIER
    files = {p: p.stat().st_mtime_ns for p in all_files(settings.store.origin_root)}
    record = stores.manifests.read(old.manifest.key)

    again = optimize_file(source, settings=settings, stores=stores)  # today's defaults
    assert again.reused and again.manifest == old.manifest
    assert {p: p.stat().st_mtime_ns for p in all_files(settings.store.origin_root)} == files
    assert stores.manifests.read(old.manifest.key) == record
    tag = picture(again.manifest, sizes="100vw")
    assert all(f"{w}w" in tag for w in EARLIER)  # served as it was made

    asked = settings.updated(remake_earlier_defaults=True)
    remade = optimize_file(source, settings=asked, stores=stores)
    assert not remade.reused
    assert sorted({v.width for v in remade.manifest.variants}) == settings.image.widths
    gone = {v.path for v in old.manifest.variants} - {v.path for v in remade.manifest.variants}
    assert gone
    gc(settings)  # the default grace: the files the old manifest named wait out their week
    assert all((settings.store.origin_root / p).exists() for p in gone)
    gc(settings, grace=0, now=time.time() + 1)
    assert not any((settings.store.origin_root / p).exists() for p in gone)
    # made with today's defaults now: the next run reuses it, asked or not
    assert optimize_file(source, settings=asked, stores=stores).reused
