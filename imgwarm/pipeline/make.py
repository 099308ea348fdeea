"""Make: a source's bytes to its encoded files. The order of the pixel steps, written down once.

    probe (format, limits, memory, on the header) -> EXIF and credits -> plan the widths
    -> decode (strict, shrink-on-load) -> fit (largest width) -> to_srgb -> [in memory]
    -> upright -> for each width: fit -> encode each format, with the EXIF -> name by hash

With a ladder by bytes (width_step_bytes), the smallest and the largest widths are made first,
and the widths between are chosen from their files' bytes (pipeline/variants.ladder).

Files come out named (``{slug}.{hash}.{ext}``), not placed: where a name goes is the store's
layout (``imgwarm.store``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

import pyvips

from imgwarm.carried import Credits, Placeholder
from imgwarm.exceptions import CorruptImage, LimitExceeded, SourceError
from imgwarm.formats import OUTPUTS, Format
from imgwarm.pipeline import gainmap, jxl, metadata
from imgwarm.pipeline.budget import budget
from imgwarm.pipeline.colour import to_srgb
from imgwarm.pipeline.decode import decode
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.pipeline.exif import read_exif
from imgwarm.pipeline.made import Encoded, Made
from imgwarm.pipeline.memory import decode_cost, describe
from imgwarm.pipeline.naming import content_hash, file_name, slug_for
from imgwarm.pipeline.orient import upright
from imgwarm.pipeline.placeholder import placeholder
from imgwarm.pipeline.probe import Probe, probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.sniff import NAMES
from imgwarm.pipeline.variants import fallback_at, height_for, ladder, plan_widths
from imgwarm.pipeline.vipsutil import (
    LIBVIPS,
    VipsComplaint,
    clear_errors,
    readable_errors,
    vips_reason,
)
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.config import ImageSettings
    from imgwarm.quality.ssimulacra2 import Reference



class Hint(NamedTuple):
    """Auto quality: what the last checked width of a format found."""

    quality: int
    full_chroma: bool  # a JPEG with full-resolution colour below q90
    reached: bool  # its score reached the target (not a format's ceiling at q100)


def render_master(info: Probe, width: int, height: int, name: str) -> pyvips.Image:
    """The largest variant's pixels, upright and sRGB, in memory: decoded once."""
    stored = (height, width) if info.transposed else (width, height)
    image = decode(info, *stored, name)
    image = fit(image, *stored)
    image = to_srgb(image, info.icc)
    image = image.copy_memory()  # the sequential read ends here; rotation needs random access
    image = upright(image, info.orientation)
    # Rotated, copied again: every width read through a rotating view cost 10% more time.
    return image.copy_memory() if info.orientation > 1 else image


# Why a source's decode holds the whole image (memory.py), for the refusal's line.
_HELD = {"jpeg": "a progressive or multi-scan JPEG holds all of its coefficients; ",
         "png": "an interlaced PNG is decoded whole; ",
         "webp": "a WebP is decoded whole, into two RGBA images; ",
         "avif": "an AVIF is decoded whole, through several copies; ",
         "heif": "a HEIF is decoded whole, through several copies; ",
         "gif": "a GIF is decoded whole, into an RGBA bitmap; ",
         "tiff": "a TIFF strip or tile may hold the whole image; "}


@dataclass(frozen=True)
class Plan:
    widths: list[int]  # with a ladder by bytes: its two ends
    formats: list[Format]
    cost: int  # bytes of memory, estimated on the header
    notes: list[str]  # formats left out, and why


def plan(name: str, info: Probe, settings: ImageSettings) -> Plan:
    """The widths and formats to make and the memory it takes. A format that cannot hold even
    a 1-pixel-wide variant (a 1x17000 strip in WebP, 16383 pixels a side at most) is left out
    with a note; refuses, on the header, what no format can hold or what needs more memory
    than the whole budget."""
    full_w, full_h = info.displayed_width, info.displayed_height
    formats, notes = list(settings.formats), []
    while True:
        max_side = min(OUTPUTS[f].max_side for f in formats)
        widths = plan_widths(full_w, full_h, settings.widths, max_side)
        if widths and settings.byte_ladder():
            widths = sorted({widths[0], widths[-1]})
        if widths:
            break
        if len(formats) == 1:
            raise LimitExceeded(
                name, f"{full_w}x{full_h} is too narrow for its height: even 1 pixel wide, a "
                f"variant would be over {max_side} pixels tall, the most {formats[0]} can hold"
            )
        narrowest = min(formats, key=lambda f: OUTPUTS[f].max_side)
        formats.remove(narrowest)
        notes.append(f"no {narrowest}: at {full_w}x{full_h}, even 1 pixel wide it would be "
                     f"over the {OUTPUTS[narrowest].max_side} pixels a side it can hold")
    searched = any(settings.quality(f) == "auto" for f in formats)
    cost = decode_cost(info, widths[-1], height_for(widths[-1], full_w, full_h), searched)
    if cost > settings.max_memory:
        held = ""
        if info.buffered:
            held = _HELD[info.format]
        if searched:
            held += "an auto quality's metric holds its own planes of the widest variant; "
        raise LimitExceeded(
            name, f"making it needs about {describe(cost)} of memory ({held}estimated on the "
            f"header), over max_memory ({describe(settings.max_memory)}); refused before "
            "decoding"
        )
    return Plan(widths, formats, cost, notes)


def _gain(info: Probe, warnings: list[str]) -> pyvips.Image | None:
    """The source's gain map, turned as the picture is; None (said in ``warnings``) when it
    cannot be decoded: the photo is then made SDR, not refused."""
    if info.gainmap is None:
        return None
    prepared, said = gainmap.prepare(info.gainmap, info.orientation)
    warnings += said
    return prepared


class _Unread(pyvips.Error):  # type: ignore[misc]  # (pyvips has no stubs)
    """A libvips failure while the source's pixels were decoded, with its format's name."""

    def __init__(self, error: pyvips.Error, source_format: str) -> None:
        super().__init__(error.message, error.detail or "\n")  # ("": read the buffer again)
        self.source_format = source_format


def _encode_all(name: str, info: Probe, exif: bytes | None, settings: ImageSettings,
                chosen: Plan, warnings: list[str]) -> tuple[list[Encoded], Placeholder | None]:
    """Every file, and the placeholder (from the smallest variant's pixels)."""
    widths = chosen.widths
    full_w, full_h = info.displayed_width, info.displayed_height
    with budget(settings.max_memory).reserve(chosen.cost):
        try:
            master = render_master(info, widths[-1], height_for(widths[-1], full_w, full_h),
                                   name)
        except pyvips.Error as error:  # (decoded lazily: here is where the loader reads)
            raise _Unread(error, NAMES[info.format]) from None
        gain = _gain(info, warnings) if "jpeg" in chosen.formats else None
        slug = slug_for(printable(name))
        made: dict[int, list[Encoded]] = {}
        preview: Placeholder | None = None
        hints: dict[Format, Hint] = {}  # auto: the quality the previous width needed

        def at(width: int, fallback: bool = True) -> tuple[pyvips.Image, list[Encoded]]:
            """One width's files: every format, or all but the JPEG fallback (which is then
            still encoded where a JPEG XL file is recompressed from it, not kept)."""
            resized = fit(master, width, height_for(width, full_w, full_h))
            # Resample once into memory; every encoder then reads the same pixels.
            image = resized if resized is master else resized.copy_memory()
            frame = Frame(image, None if gain is None or info.gainmap is None else
                          gainmap.for_variant(info.gainmap, gain, image, full_w, full_h))
            references: dict[bool, Reference] = {}  # auto: the metric's, for every format
            kept = [f for f in chosen.formats if fallback or f != thin]
            files: dict[Format, Encoded] = {}
            jpeg: list[Format] = ["jpeg"] if recompressed and "jpeg" not in kept else []
            made = [*kept, *jpeg]
            for fmt in sorted(made, key=lambda f: f in recompressed):  # JPEG first
                files[fmt] = (_recompressed(files["jpeg"], slug, settings) if fmt in recompressed
                              else _encode_one(frame, fmt, settings, exif, slug, hints,
                                               references))
            return image, [files[fmt] for fmt in kept]

        recompressed: set[Format] = {"jxl"} if settings.jxl_from_jpeg and "jpeg" in chosen.formats \
            and "jxl" in chosen.formats else set()
        # the JPEG beside other formats is a fallback: made at fallback_widths' widths only;
        # not with a gain map: then it is the file HDR screens take (an Ultra HDR JPEG)
        thin: Format | None = "jpeg" if len(chosen.formats) > 1 and gain is None else None
        ladder_ends = settings.byte_ladder() and len(widths) == 2
        fallback = set(widths) if ladder_ends else fallback_at(widths, settings.fallback_widths)
        narrowest: dict[Format, Hint] = {}
        for width in widths:
            image, made[width] = at(width, width in fallback)
            if width == widths[0]:
                preview = placeholder(image)
                narrowest = dict(hints)
        if ladder_ends:
            ends = [(w, len(made[w][0].data)) for w in widths]  # the first format's bytes
            hints.update(narrowest)  # (auto: each width's search from the narrower one's)
            steps = ladder(ends[0], ends[1], settings.width_step_bytes, settings.max_widths)
            fallback = fallback_at(steps, settings.fallback_widths) | set(widths)
            for width in steps:
                if widths[0] < width < widths[1]:
                    made[width] = at(width, width in fallback)[1]
            if any(f.predicted and hints[f.format][:2] != (f.quality, f.full_chroma)
                   for f in made[widths[1]]):
                # the widest end was predicted before the widths between were checked: made
                # again at the widest checked one's quality, as every predicted width is
                made[widths[1]] = at(widths[1])[1]
    return [file for width in sorted(made) for file in made[width]], preview


def _encode_one(frame: Frame, fmt: Format, settings: ImageSettings, exif: bytes | None,
                slug: str, hints: dict[Format, Hint],
                references: dict[bool, Reference]) -> Encoded:
    """One format of one width (``references``: the metric's, shared by a width's formats)."""
    quality, found, predicted, full = settings.quality(fmt), None, False, False
    hint = hints.get(fmt)
    if quality == "auto" and hint is not None and hint.reached and \
            _predicted(frame.image.width, settings):
        quality, full, predicted = hint.quality, hint.full_chroma, True  # (hints stay its)
        data = encode(frame, fmt, settings, exif, quality, full_chroma=full)
    elif quality == "auto":
        # (OpenCV and the metric load only here: a worker starts sooner without)
        from imgwarm.pipeline.quality import auto_quality

        picked, full = auto_quality(frame, fmt, settings, exif, hint and hint.quality,
                                    references)
        data, quality, found = picked.data, picked.quality, picked.score
        hints[fmt] = Hint(quality, full, picked.score >= settings.quality_target)
    else:
        data = encode(frame, fmt, settings, exif)
    file = file_name(slug, content_hash(data), OUTPUTS[fmt].extension, settings.hash_length)
    return Encoded(fmt, frame.image.width, frame.image.height, file, data, quality, found,
                   hdr=fmt == "jpeg" and frame.hdr is not None, predicted=predicted,
                   full_chroma=full)


def _recompressed(jpeg: Encoded, slug: str, settings: ImageSettings) -> Encoded:
    """The JPEG XL file of a width: its JPEG recompressed losslessly (the same pixels, so the
    JPEG's quality and score are its own)."""
    data = jxl.recompress(jpeg.data)
    file = file_name(slug, content_hash(data), OUTPUTS["jxl"].extension, settings.hash_length)
    return replace(jpeg, format="jxl", name=file, data=data, hdr=False)


def _predicted(width: int, settings: ImageSettings) -> bool:
    """Is this width's auto quality taken unchecked from the widest checked width's (given
    one was checked, and reached the target: a width at a format's ceiling, lossy WebP's
    q100 on a small colourful photo, says nothing of what a wider one needs, which is then
    checked)? Only past quality_check_width."""
    return 0 < settings.quality_check_width < width


def _make(data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
    """The pixel work: probe, decode, transform, encode. Raises SourceError or pyvips.Error."""
    info = probe(data, name, settings)
    exif_source = read_exif(info.exif)
    final = given.merged_over(metadata.credits_from_exif(exif_source))
    exif, left_out = metadata.build_exif(
        final, exif_source, keep_gps=settings.keep_gps, keep_maker_notes=settings.keep_maker_notes
    )
    chosen = plan(name, info, settings)
    warnings = [*info.notes, *chosen.notes, *left_out]
    files, preview = _encode_all(name, info, exif, settings, chosen, warnings)
    return Made(info.displayed_width, info.displayed_height, final, files, warnings, preview)


PREVIEW_WIDTH = 64  # decoded (shrunk on load) for the placeholder of a manifest without one


def preview(data: bytes, name: str, settings: ImageSettings) -> Placeholder:
    """The placeholder of a source made before placeholders were: decoded small, through the
    same steps as its variants. Placeholder.none() when it cannot be made (the variants stand
    as they are, and it is not tried again)."""
    try:
        with LIBVIPS.shared(), readable_errors():
            info = probe(data, name, settings)
            full_w, full_h = info.displayed_width, info.displayed_height
            width = min(PREVIEW_WIDTH, full_w)
            height = height_for(width, full_w, full_h)
            # a PNG is decoded whole: within the memory budget, as its variants were
            with budget(settings.max_memory).reserve(decode_cost(info, width, height)):
                return placeholder(render_master(info, width, height, name))
    except (pyvips.Error, VipsComplaint, SourceError):
        return Placeholder.none()


def make(data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
    """``name``'s files from its bytes (``name`` is the source's file name or key: for the
    slug and messages). A libvips failure is looked at again with no other libvips work going
    on, so that its message is this image's own (libvips has one error buffer per process);
    the JPEG decoder's complaints are each decode's own, and final."""
    try:
        with LIBVIPS.shared(), readable_errors():
            return _make(data, name, settings, given)
    except (pyvips.Error, VipsComplaint):
        pass
    with LIBVIPS.alone():
        clear_errors()
        try:
            with readable_errors():
                return _make(data, name, settings, given)
        except pyvips.Error as error:
            decoding = error.source_format if isinstance(error, _Unread) else None
            raise CorruptImage(name, vips_reason(error, decoding=decoding)) from None
