"""The markup imgwarm writes, under html-validate's recommended rules (issue 27), as users
check their pages: the gallery page whole, and the tags of ``imgwarm picture`` in a page of
their own, with every rule (``--csp``) and without (where only inline styles, the placeholder
as a ``style`` attribute, are allowed). html-validate 9 (npm) is installed by ./test.sh."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Credits, Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.serve.gallery import write_gallery
from imgwarm.serve.picture import picture, placeholder_rule
from imgwarm.store import Stores
from tests.support import parts
from tests.support.files import REPO

pytestmark = pytest.mark.integration

VALIDATOR = REPO / ".venv" / "node" / "node_modules" / ".bin" / "html-validate"
HOSTILE = '"><script>alert(1)</script> & <b>«bold»</b>'


def validate(page: Path, *, inline_styles: bool = False) -> list[str]:
    """html-validate's findings on ``page`` (rule: message), [] when it passes."""
    if not VALIDATOR.exists():
        parts.missing(f"html-validate ({VALIDATOR}; ./test.sh installs it with npm)")
    rules = {"no-inline-style": "off"} if inline_styles else {}
    config = page.with_suffix(".json")
    config.write_text(json.dumps({"extends": ["html-validate:recommended"], "rules": rules}))
    done = subprocess.run([str(VALIDATOR), "--config", str(config), "--formatter", "json",
                           str(page)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    found = json.loads(done.stdout or "[]")
    return [f"{m['ruleId']}: {m['message']}" for result in found for m in result["messages"]]


@pytest.fixture
def manifests(settings: Settings, tmp_path: Path) -> list[Manifest]:
    stores = Stores.local(settings.store)
    made = []
    for n, (shape, text) in enumerate([((1200, 800), "A red bicycle"),
                                       ((800, 1200), HOSTILE), ((900, 900), None)]):
        source = tmp_path / f"photo-{n}.jpg"
        source.write_bytes(jpeg_with_exif(photo(*shape, seed=n), quality=90))
        made.append(optimize_file(source, settings=settings, stores=stores,
                                  credits=Credits.given(description=text)).manifest)
    return made


def test_the_gallery_page_passes_every_recommended_rule(
        settings: Settings, manifests: list[Manifest], tmp_path: Path) -> None:
    gallery = write_gallery(settings, manifests, tmp_path / "www")
    assert validate(gallery.page) == []


def page_of(tags: list[str], style: str = "") -> str:
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Photos</title>\n<style>{style}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(tags) + "\n</main>\n</body>\n</html>\n")


@pytest.mark.parametrize("csp", [False, True])
def test_picture_tags_pass_with_inline_styles_only_where_csp_is_off(
        manifests: list[Manifest], tmp_path: Path, csp: bool) -> None:
    tags = [picture(m, eager=n == 0, csp=csp, sizes="(max-width: 600px) 100vw, 50vw")
            for n, m in enumerate(manifests)]
    rules = [rule for m in manifests if (found := placeholder_rule(m)) for rule in found[1:]]
    page = tmp_path / "page.html"
    page.write_text(page_of(tags, " ".join(rules) if csp else ""))
    assert validate(page, inline_styles=not csp) == []
    if not csp:  # (the rule that is off is what the CSP mode is for)
        assert any(m.startswith("no-inline-style") for m in validate(page))
