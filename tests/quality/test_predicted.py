"""Auto quality with quality_check_width: variants up to that width are searched and checked,
wider ones take the quality the widest checked one needed, unchecked, and say so. Checked on
the files written (decoded) against the resized source's pixels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.quality.ssimulacra2 import pixels, score
from imgwarm.samples import photo
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.quality import TARGET, TOLERANCE, auto, decoded, frame_for, source_file

pytestmark = pytest.mark.slow


def _measured(source: Path, settings: Settings, manifest: Manifest, variant: Variant) -> float:
    """The variant's SSIMULACRA2 score, from its file against the resized source's pixels."""
    data = (settings.store.origin_root / variant.path).read_bytes()
    reference = pixels(frame_for(source, settings, manifest, variant).image)
    return score(reference, decoded(data))


def test_wide_variants_are_predicted_and_land_in_the_band(corpus: Path,
                                                          settings: Settings) -> None:
    """On a photo whose wide variants need about the quality its 640-px ones do, the 1280-px
    variants, encoded once at that quality and never scored, are in the band on decoded
    pixels, as the checked ones are. (How often a prediction lands in the band over many
    photos is bench/quality.py's figure: on others it does not.)"""
    source = corpus / "HMD_Nokia_8.3_5G.jpg"
    settings = auto(settings, widths="320,640,1280", quality_check_width=640)
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    by = {(v.format, v.width): v for v in manifest.variants}
    assert sorted(by) == sorted((f, w) for f in ("webp", "jpeg") for w in (320, 640, 1280))
    for fmt in ("webp", "jpeg"):
        for width in (320, 640):  # checked: searched, scored, and the score is the file's
            checked = by[(fmt, width)]
            found = _measured(source, settings, manifest, checked)
            assert not checked.predicted and checked.score is not None
            assert found == pytest.approx(checked.score, abs=0.05)
            if checked.quality != 100:  # (lossy WebP's ceiling: said in its score)
                assert TARGET <= found <= TARGET + TOLERANCE, (checked, found)
        assert by[(fmt, 640)].quality != 100
        wide = by[(fmt, 1280)]  # predicted: the 640-px quality, no score recorded
        assert wide.predicted and wide.score is None
        assert wide.quality == by[(fmt, 640)].quality
        found = _measured(source, settings, manifest, wide)
        assert TARGET <= found <= TARGET + TOLERANCE, (wide, found)


def test_the_narrowest_variant_is_always_checked(settings: Settings, tmp_path: Path) -> None:
    """A check width below every variant's still checks the first: a prediction needs a
    checked quality to come from. Every later one is predicted from it."""
    settings = auto(settings, widths="400,600", quality_check_width=100)
    source = source_file(tmp_path, "a.jpg", photo(700, 450, seed=8))
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    for variant in manifest.variants:
        first = variant.width == 400
        assert variant.predicted is not first and (variant.score is None) is not first
        if first:
            assert variant.score is not None and variant.score >= TARGET
    qualities = {(v.format, v.width): v.quality for v in manifest.variants}
    assert all(qualities[(f, 600)] == qualities[(f, 400)] for f in ("webp", "jpeg"))


def test_a_prediction_is_recorded_reused_and_remade_when_the_width_changes(
        settings: Settings, tmp_path: Path) -> None:
    settings = auto(settings, widths="320,640", quality_check_width=320)
    stores = Stores.local(settings.store)
    source = source_file(tmp_path, "b.jpg", photo(800, 500, seed=4))
    first = optimize_file(source, settings=settings, stores=stores)
    [path] = [p for p in settings.store.manifest_root.rglob("*.json")
              if json.loads(p.read_text()).get("key") == first.manifest.key]
    raw = json.loads(path.read_text())
    flags = {(v["format"], v["width"]): v.get("predicted") for v in raw["variants"]}
    # only a predicted variant carries the key: others are written as before it existed
    assert flags == {("webp", 320): None, ("jpeg", 320): None,
                     ("webp", 640): True, ("jpeg", 640): True}
    again = optimize_file(source, settings=settings, stores=stores)
    assert again.reused and again.manifest == first.manifest
    every = optimize_file(source, settings=settings.updated(quality_check_width=0),
                          stores=stores)
    assert not every.reused  # another check width: other outputs
    assert not any(v.predicted for v in every.manifest.variants)
    assert all(v.score is not None for v in every.manifest.variants)


def test_the_check_width_changes_nothing_for_a_fixed_quality(settings: Settings,
                                                             tmp_path: Path) -> None:
    """Pinned: the digests of fixed-quality and auto settings are those of manifests made
    before the check width existed (nothing is remade), and a fixed quality's files are the
    same bytes whatever the check width."""
    # (pinned since issue 42 changed the widths; the earlier ones are still current)
    assert load_settings(quality_check_width=640).digest("output") == "f0b81b0ae6f64c74"
    auto = load_settings(webp_quality="auto", jpeg_quality="auto")
    assert auto.digest("output") == "2e3e63b35390d3a2"
    assert "a854b0d709f3ef26" in auto.digests("output")
    assert auto.updated(quality_check_width=640).digest("output") != "2e3e63b35390d3a2"
    source = source_file(tmp_path, "c.jpg", photo(900, 600, seed=9))
    made = {}
    for width in (0, 320):
        fixed = settings.updated(widths="320,640", quality_check_width=width,
                                 origin_root=tmp_path / f"o{width}",
                                 manifest_root=tmp_path / f"m{width}")
        manifest = optimize_file(source, settings=fixed,
                                 stores=Stores.local(fixed.store)).manifest
        assert not any(v.predicted or v.score is not None for v in manifest.variants)
        made[width] = {v.path: (fixed.store.origin_root / v.path).read_bytes()
                       for v in manifest.variants}
    assert made[0] == made[320]


def test_the_command_says_checked_or_predicted(settings: Settings, tmp_path: Path) -> None:
    source = source_file(tmp_path, "d.jpg", photo(700, 450, seed=6))
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    done = Cli()("optimize", source, "--webp-quality", "auto", "--jpeg-quality", "auto",
                 "--widths", "320,640", "--quality-check-width", "320", "--report-quality",
                 env=env)
    assert done.exit_code == 0, done.stderr
    lines = {tuple(line.split()[:2]): " ".join(line.split()[2:]) for line in
             done.stdout.splitlines()[1:]}
    for fmt in ("webp", "jpeg"):
        checked = re.fullmatch(r"(q\d+(?: 4:4:4)?) checked, score ([\d.]+)", lines[(fmt, "320")])
        assert checked is not None and float(checked[2]) >= TARGET, lines
        assert lines[(fmt, "640")] == f"{checked[1]} predicted, not scored"
    done = Cli()("optimize", source, "--webp-quality", "auto", "--widths", "320,640",
                 "--quality-check-width", "320", "--json", env=env)
    variants = json.loads(done.stdout)["variants"]
    webp = {v["width"]: v for v in variants if v["format"] == "webp"}
    assert webp[640]["predicted"] is True and webp[640]["score"] is None
    assert "predicted" not in webp[320] and webp[320]["score"] >= TARGET
    bad = Cli()("optimize", source, "--quality-check-width", "-1", env=env)
    assert bad.exit_code == 2 and "quality_check_width" in bad.stderr.replace("-", "_")


def test_a_width_at_the_format_s_ceiling_is_no_prediction(corpus: Path,
                                                          settings: Settings) -> None:
    """Lossy WebP at 320 px cannot reach the target on a colourful photo (q100, below it):
    the next width is then checked, not predicted at q100, and predictions come from it."""
    source = corpus / "HMD_Nokia_8.3_5G.jpg"
    settings = auto(settings, widths="320,640,1280", formats="webp", quality_check_width=320)
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    by = {v.width: v for v in manifest.variants}
    assert by[320].quality == 100 and by[320].score is not None and by[320].score < TARGET
    assert not by[640].predicted and by[640].score is not None and by[640].score >= TARGET
    assert by[1280].predicted and by[1280].quality == by[640].quality < 100


def test_with_widths_by_bytes_the_widest_end_takes_the_widest_checked_quality(
        corpus: Path, settings: Settings) -> None:
    """The ladder makes its widest end before the widths between: once they are checked,
    every predicted width, the widest end too, has the widest checked one's quality."""
    source = corpus / "HMD_Nokia_8.3_5G.jpg"
    settings = auto(settings, widths="320,1920", formats="jpeg", width_step_bytes="4K",
                    quality_check_width=640)
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    variants = sorted(manifest.variants, key=lambda v: v.width)
    checked = [v for v in variants if not v.predicted]
    predicted = [v for v in variants if v.predicted]
    assert len(checked) >= 2 and len(predicted) >= 2 and variants[-1].predicted
    assert all(v.width <= 640 for v in checked) and all(v.width > 640 for v in predicted)
    widest = max(checked, key=lambda v: v.width)
    assert {v.quality for v in predicted} == {widest.quality}
