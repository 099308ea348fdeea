"""JPEG XL as an output (issue 42): each width's JPEG recompressed losslessly (the JPEG comes
back from it bit for bit), or encoded from the pixels; the description and copyright in a
plain Exif box either way; offered first in <picture>; its settings leave the digests of
manifests without JPEG XL as they were."""

from __future__ import annotations

import io
from pathlib import Path

import piexif
import pytest
import pyvips
from PIL import Image

from imgwarm.config import Settings
from imgwarm.manifest import Credits, Manifest
from imgwarm.pipeline import jxl
from imgwarm.serve.picture import picture
from tests.support.files import REPO
from tests.support.images import mean_delta_e
from tests.support.pipeline import run

PHOTO = REPO / "tests" / "corpus" / "Landscape_5.jpg"  # 1800x1200, EXIF orientation 5
CREDITS = Credits(description="Vélo rouge sur le quai", copyright="(c) 2026 Ann Example")


def boxes(data: bytes) -> list[tuple[bytes, bytes]]:
    """A JPEG XL container's boxes: (type, content)."""
    assert data[:12] == b"\x00\x00\x00\x0cJXL \r\n\x87\n", "not a JPEG XL container"
    found, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at:at + 4], "big")
        assert size >= 8, "a box without a size (to the end) or a large one: not ours"
        found.append((data[at + 4:at + 8], data[at + 8:at + size]))
        at += size
    return found


def exif_of(data: bytes) -> dict[str, str]:
    """The description and copyright in a JPEG XL file's Exif box (a 4-byte offset to the
    TIFF header, then the TIFF structure), read by piexif."""
    found = [body for kind, body in boxes(data) if kind == b"Exif"]
    assert len(found) == 1, [kind for kind, _ in boxes(data)]
    offset = int.from_bytes(found[0][:4], "big")
    tags = piexif.load(found[0][4 + offset:])["0th"]
    return {"description": tags[piexif.ImageIFD.ImageDescription].decode(),
            "copyright": tags[piexif.ImageIFD.Copyright].decode()}


def decode(data: bytes) -> tuple[bool, bytes | pyvips.Image]:
    """(was it a recompressed JPEG, the JPEG's bytes back or the pixels)."""
    from pillow_jxl import Decoder

    recompressed, _, pixels, _, _ = Decoder()(data)
    if recompressed:
        return True, bytes(pixels)
    with Image.open(io.BytesIO(data)) as image:
        return False, pyvips.Image.new_from_array(image.convert("RGB"))


def made(settings: Settings, **changes: object) -> Manifest:
    return run(PHOTO.read_bytes(), "photo.jpg", settings.updated(**changes), CREDITS)


def files(settings: Settings, manifest: Manifest, fmt: str) -> dict[int, bytes]:
    return {v.width: (settings.store.origin_root / v.path).read_bytes()
            for v in manifest.variants if v.format == fmt}


def test_each_width_is_its_jpeg_recompressed(settings: Settings) -> None:
    manifest = made(settings, formats="jxl,webp,jpeg", jxl_from_jpeg=True, fallback_widths="")
    jpegs, jxls = files(settings, manifest, "jpeg"), files(settings, manifest, "jxl")
    assert sorted(jxls) == sorted(jpegs) and len(jxls) >= 3
    for width, data in jxls.items():
        recompressed, back = decode(data)
        assert recompressed and back == jpegs[width], width  # bit for bit
        assert len(data) < len(jpegs[width]), (width, len(data), len(jpegs[width]))
        assert exif_of(data) == {"description": CREDITS.description,
                                 "copyright": CREDITS.copyright}
        assert b"brob" not in [kind for kind, _ in boxes(data)]
    # (our JPEGs are progressive, with optimized tables: 6-15% is left to take, not 20%)
    assert sum(map(len, jxls.values())) < 0.92 * sum(map(len, jpegs.values()))
    by_width = {v.width: v for v in manifest.variants if v.format == "jxl"}
    jpeg = {v.width: v for v in manifest.variants if v.format == "jpeg"}
    assert all(by_width[w].height == jpeg[w].height and by_width[w].quality == jpeg[w].quality
               for w in by_width)


def test_encoded_from_the_pixels_it_looks_like_the_jpeg(settings: Settings) -> None:
    manifest = made(settings, formats="jxl,jpeg", widths="320,640")
    jpegs, jxls = files(settings, manifest, "jpeg"), files(settings, manifest, "jxl")
    for width, data in jxls.items():
        recompressed, pixels = decode(data)
        assert not recompressed and isinstance(pixels, pyvips.Image)
        reference = pyvips.Image.new_from_buffer(jpegs[width], "")
        assert (pixels.width, pixels.height) == (reference.width, reference.height)
        assert mean_delta_e(pixels, reference) < 3.0  # upright, same colours: a lossy copy
        assert exif_of(data)["description"] == CREDITS.description


def test_without_a_jpeg_the_files_are_encoded(settings: Settings) -> None:
    manifest = made(settings, formats="jxl,webp", widths="320", jxl_from_jpeg=True)
    data = next(iter(files(settings, manifest, "jxl").values()))
    assert decode(data)[0] is False


def test_recompressed_where_the_fallback_is_not_kept(settings: Settings) -> None:
    """With the JPEG at its fallback widths only, every width still gets its JPEG XL from
    a JPEG of its own, which is not kept where the fallback is not made."""
    manifest = made(settings, formats="jxl,webp,jpeg", jxl_from_jpeg=True,
                    widths="320,640,900", fallback_widths="320")
    jpegs, jxls = files(settings, manifest, "jpeg"), files(settings, manifest, "jxl")
    assert sorted(jpegs) == [320, 900] and sorted(jxls) == [320, 640, 900]
    assert all(decode(data)[0] for data in jxls.values())
    assert decode(jxls[900])[1] == jpegs[900]


def test_picture_offers_it_first(settings: Settings) -> None:
    manifest = made(settings, formats="jxl,avif,webp,jpeg", widths="320,640")
    tag = picture(manifest, sizes="100vw")
    order = [t for t in ("image/jxl", "image/avif", "image/webp") if t in tag]
    assert order == ["image/jxl", "image/avif", "image/webp"]
    assert tag.index("image/jxl") < tag.index("image/avif") < tag.index("image/webp")
    assert "<img" in tag and ".jpg" in tag.split("<img", 1)[1]  # the fallback stays JPEG


def test_its_settings_change_only_manifests_that_have_it(settings: Settings) -> None:
    plain = settings.digest("output")
    assert settings.updated(jxl_quality=50, jxl_effort=5, jxl_from_jpeg=True
                            ).digest("output") == plain
    with_jxl = settings.updated(formats="jxl,webp,jpeg")
    assert with_jxl.digest("output") != plain
    assert with_jxl.updated(jxl_from_jpeg=True).digest("output") != with_jxl.digest("output")


@pytest.mark.parametrize("exif", [None, b"Exif\x00\x00" + b"II*\x00\x08\x00\x00\x00\x00\x00"])
def test_a_jpeg_without_a_description_recompresses(tmp_path: Path, exif: bytes | None) -> None:
    image = (pyvips.Image.xyz(80, 60)[0] * 3).cast("uchar")
    data = bytes(image.bandjoin([image, image]).copy(interpretation="srgb").jpegsave_buffer())
    if exif:
        out = io.BytesIO()
        piexif.insert(exif, data, out)
        data = out.getvalue()
    recompressed, back = decode(jxl.recompress(data))
    assert recompressed and back == data
