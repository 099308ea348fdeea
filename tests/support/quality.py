"""Helpers of the auto-quality tests: the settings, and the resized source's pixels a
variant is judged against, as the pipeline makes them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy
import pyvips
from PIL import Image

from imgwarm.config import Settings
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.encode import Frame
from imgwarm.pipeline.make import render_master
from imgwarm.pipeline.probe import probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.variants import height_for
from imgwarm.samples import jpeg_with_exif

TARGET, TOLERANCE = 75.0, 3.0


def auto(settings: Settings, **options: object) -> Settings:
    return settings.updated(webp_quality="auto", jpeg_quality="auto", **options)


def decoded(data: bytes) -> numpy.ndarray:
    return numpy.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def frame_for(source: Path, settings: Settings, manifest: Manifest, variant: Variant) -> Frame:
    """The resized source's pixels for a variant, as the pipeline makes them: the widest
    variant rendered from the source, resized to this one."""
    info = probe(source.read_bytes(), source.name, settings.image)
    widest = max(v.width for v in manifest.variants)
    master = render_master(info, widest, height_for(widest, info.displayed_width,
                                                    info.displayed_height), source.name)
    return Frame(fit(master, variant.width, variant.height).copy_memory())


def source_file(folder: Path, name: str, image: pyvips.Image) -> Path:
    path = folder / name
    path.write_bytes(jpeg_with_exif(image, quality=95))
    return path
