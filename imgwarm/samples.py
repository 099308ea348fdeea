"""Sample photos made from nothing, so the quick start and the tests need no downloads.

They look enough like photos for the encoders (smooth gradients, edges, fine noise) and carry
what the pipeline must handle: EXIF text in UTF-8, rotated orientations, CMYK, PNG.
"""

from __future__ import annotations

import io
from pathlib import Path

import piexif
import pyvips

from imgwarm.manifest import Credits
from imgwarm.store.local import make_folders


def photo(width: int, height: int, seed: int = 0) -> pyvips.Image:
    """An sRGB test picture, different for each seed, with an asymmetric marker top-left so
    that any rotation or mirror shows."""
    x = pyvips.Image.xyz(width, height)
    fx, fy = x[0] / width, x[1] / height
    red = fx * 200 + 30 + seed * 13 % 40
    green = ((fx - fy) * 3.1).sin() * 60 + fy * 120 + 40
    blue = ((fx + seed) * 9).cos() * 40 + (1 - fy) * 150 + 30
    image = red.bandjoin([green, blue])
    image = image + pyvips.Image.gaussnoise(width, height, sigma=6, mean=0, seed=seed)
    image = image.gaussblur(0.6)
    marker_w, marker_h = max(1, width // 5), max(1, height // 8)
    image = image.draw_rect([250, 250, 250], 0, 0, marker_w, marker_h, fill=True)
    image = image.draw_rect([20, 20, 20], 0, 0, max(1, marker_w // 3), marker_h, fill=True)
    return image.cast("uchar").copy(interpretation="srgb")


# Orientation tag -> the transform that stores an upright picture so that the tag undoes it.
_STORE_FOR_ORIENTATION = {
    1: lambda im: im,
    2: lambda im: im.fliphor(),
    3: lambda im: im.rot180(),
    4: lambda im: im.flipver(),
    5: lambda im: im.rot90().fliphor(),
    6: lambda im: im.rot270(),
    7: lambda im: im.rot270().fliphor(),
    8: lambda im: im.rot90(),
}


def stored_for_orientation(upright: pyvips.Image, orientation: int) -> pyvips.Image:
    """Pixels as a camera would store ``upright`` when it writes EXIF Orientation N."""
    return _STORE_FOR_ORIENTATION[orientation](upright).copy_memory()


def jpeg_with_exif(
    image: pyvips.Image, *, orientation: int = 1, credits: Credits | None = None,
    quality: int = 90, **save: object,
) -> bytes:
    """A JPEG carrying EXIF written by piexif: credits as UTF-8, and the orientation tag."""
    data = bytes(image.jpegsave_buffer(Q=quality, keep="icc", **save))
    ifd0: dict[int, object] = {piexif.ImageIFD.Orientation: orientation}
    for name, tag in (("description", piexif.ImageIFD.ImageDescription),
                      ("copyright", piexif.ImageIFD.Copyright),
                      ("artist", piexif.ImageIFD.Artist)):
        value = getattr(credits or Credits(), name)
        if value is not None:
            ifd0[tag] = value.encode("utf-8")
    out = io.BytesIO()
    piexif.insert(piexif.dump({"0th": ifd0}), data, out)
    return out.getvalue()


def write_samples(folder: Path) -> list[Path]:
    """A small mixed batch of sample photos in ``folder``."""
    # 0755 whatever the umask: the quickstart's var/ holds the roots, which refuse a folder
    # above them that a group may write
    make_folders(folder)
    made: list[Path] = []
    credits = Credits(
        description="Червоний велосипед на київській вулиці",
        copyright="© 2026 imgwarm samples", artist="imgwarm",
    )
    for index, (width, height, orientation) in enumerate(
        [(2400, 1600, 1), (1600, 2400, 1), (3000, 2000, 6), (1200, 800, 3), (640, 480, 1)]
    ):
        upright = photo(width, height, seed=index)
        stored = stored_for_orientation(upright, orientation)
        path = folder / f"sample-{index + 1}-{width}x{height}.jpg"
        path.write_bytes(jpeg_with_exif(stored, orientation=orientation, credits=credits))
        made.append(path)
    cmyk = photo(1000, 700, seed=7).icc_transform("cmyk", input_profile="srgb")
    path = folder / "sample-cmyk.jpg"
    path.write_bytes(bytes(cmyk.jpegsave_buffer(Q=90)))
    made.append(path)
    path = folder / "sample-graphic.png"
    path.write_bytes(bytes(photo(800, 600, seed=9).pngsave_buffer()))
    made.append(path)
    return made
