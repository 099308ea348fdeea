"""Image settings: what each source becomes, and what is refused before any pixel work."""

from __future__ import annotations

import os
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from imgwarm.config.group import ABSENT, Group
from imgwarm.config.marks import (
    OUTPUT,
    OUTPUT_IF_AUTO,
    OUTPUT_IF_FALLBACK,
    OUTPUT_IF_JXL,
    OUTPUT_IF_LADDER,
    OUTPUT_IF_PREDICTED,
    REFUSAL,
    split_csv,
)
from imgwarm.config.units import Duration, Size
from imgwarm.formats import ORDER, SOURCES, Format, SourceFormat
from imgwarm.imageoptions import ImageOptions, ImageRules

# A worker process at rest: a queue worker's pool process (libvips, numpy, pydantic loaded;
# RSS measured 68 MiB, 35 of it its own; optimize's workers, without pydantic, 52 MiB), and
# what making a 12-megapixel photo is estimated to take at the default widths
# (pipeline/memory.py): max_memory holds the workers and one such.
IDLE_WORKER = 72 << 20
ONE_DECODE = 200 << 20

# JPEG XL encoded from the pixels (jxl_from_jpeg false): see docs/benchmarks.md, "JPEG XL".
# Effort 3: within 4% of effort 7's bytes at an equal score, at a ninth of its time.
JXL_QUALITY = 75
JXL_EFFORT = 3

# A fixed quality, or "auto": the lowest whose SSIMULACRA2 score reaches quality_target
Quality = int | Literal["auto"]


class ImageSettings(Group, ImageRules):
    """Widths, formats, qualities, limits, metadata."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    # A default that changed lists its earlier values: a manifest made with them stays current
    # (config/settings.py, Settings.digests). 0.3.0: four widths, the JPEG at each.
    EARLIER_DEFAULTS: ClassVar[dict[str, tuple[Any, ...]]] = {
        "widths": ([320, 640, 1280, 1920],), "fallback_widths": (ABSENT,)}

    widths: list[int] = Field(
        [320, 680, 860, 1080, 1290, 1920], json_schema_extra=OUTPUT,
        description="Variant widths in pixels (comma-separated); each 1..16383. "
        "Widths below the source's are made, plus the source width capped at the largest. "
        "With width_step_bytes, only the smallest and the largest are used: the bounds.")
    fallback_widths: list[int] = Field(
        [320, 640, 1920], json_schema_extra=OUTPUT_IF_FALLBACK,
        description="Widths the JPEG fallback is made at, beside other formats (comma-"
        "separated; each taken as the narrowest width made at least as wide, plus the widest "
        "made): the browsers that take no WebP or AVIF are few, and a phone never fetches the "
        "fallback, so it need not follow every width. Empty: at every width.")
    remake_earlier_defaults: bool = Field(
        False, description="Make a source again when its manifest was made with an earlier "
        "version's default of a setting that is now at its (new) default. False: such a "
        "manifest stays current and served as it is, and the new default applies to sources "
        "made from now on: a new version never re-makes a store by itself. Set it for one "
        "`imgwarm optimize` (or enqueue) run over the sources to re-make.")
    width_step_bytes: Size = Field(
        Size(0), ge=0, json_schema_extra=OUTPUT_IF_LADDER,
        description="Choose each source's widths by bytes, as Cloudinary's responsive "
        "breakpoints do (e.g. 20K): from the smallest of widths to the largest that can be "
        "made, consecutive files (of the first format) about this many bytes apart, and "
        "never more than sqrt(1.5) apart in width, so that the file a browser's srcset "
        "choice takes has at most 1.5x the pixels its slot needs. 0: the fixed widths list.")
    max_widths: int = Field(
        12, ge=2, le=64, json_schema_extra=OUTPUT_IF_LADDER,
        description="With width_step_bytes: the most widths a source gets (the byte step "
        "grows to fit; 10 keep 320..1920 within sqrt(1.5) a step).")
    formats: list[Format] = Field(
        ["webp", "jpeg"], json_schema_extra=OUTPUT,
        description="Output formats (comma-separated) among jxl, avif, webp, jpeg; a "
        "<picture> offers them in that order.")
    webp_quality: Quality = Field(80, json_schema_extra=OUTPUT,
                                  description="WebP quality, 1..100, or auto (see quality_target).")
    webp_effort: int = Field(4, ge=0, le=6, json_schema_extra=OUTPUT,
                             description="WebP encoder effort (slower = smaller).")
    jpeg_quality: Quality = Field(82, json_schema_extra=OUTPUT,
                                  description="Progressive JPEG quality, 1..100, or auto.")
    avif_quality: Quality = Field(55, json_schema_extra=OUTPUT,
                                  description="AVIF quality, 1..100, or auto.")
    quality_target: float = Field(
        75.0, gt=0, le=100, json_schema_extra=OUTPUT_IF_AUTO,
        description="The SSIMULACRA2 score an auto quality reaches: each variant is encoded at "
        "the lowest quality whose score against the resized source is at least this (75: "
        "high quality, about what q80-q85 JPEG gives on average; 90: visually lossless).")
    quality_tolerance: float = Field(
        3.0, gt=0, le=20, json_schema_extra=OUTPUT_IF_AUTO,
        description="How far above quality_target an auto quality's score may land.")
    quality_check_width: int = Field(
        0, ge=0, le=16383, json_schema_extra=OUTPUT_IF_PREDICTED,
        description="Auto quality, cheaper: variants up to this width are searched and "
        "checked against quality_target; wider ones are encoded once, unchecked, at the "
        "quality the widest checked variant of the same format needed (recorded as "
        "predicted). The narrowest variant is always checked. 0: check every variant. "
        "Saves most of the time at 640 (the wide variants are most of the pixels) but "
        "lands fewer variants in the band: see the docs' benchmark.")
    avif_effort: int = Field(4, ge=0, le=10, json_schema_extra=OUTPUT,
                             description="AVIF encoder effort, 0..10 (slower = smaller).")
    jxl_from_jpeg: bool = Field(
        False, json_schema_extra=OUTPUT_IF_JXL,
        description="Make each JPEG XL file from the JPEG of the same width, recompressed "
        "losslessly: the JPEG's pixels, its quality, in about a tenth fewer bytes than our "
        "progressive JPEGs, but more than WebP at its default quality (jxl_quality and "
        "jxl_effort then do not apply; a JPEG is then made at every width). Needs jpeg among "
        "the formats. False: encoded from the pixels.")
    jxl_quality: Quality = Field(
        JXL_QUALITY, json_schema_extra=OUTPUT_IF_JXL,
        description="JPEG XL quality when encoded from the pixels, 1..100, or auto.")
    jxl_effort: int = Field(JXL_EFFORT, ge=1, le=9, json_schema_extra=OUTPUT_IF_JXL,
                            description="JPEG XL encoder effort, 1..9 (slower = smaller).")
    accept_png: bool = Field(
        True, json_schema_extra=REFUSAL,
        description="Also accept PNG sources (when their bytes and their name say PNG).")
    source_formats: list[SourceFormat] = Field(
        list(SOURCES), json_schema_extra=REFUSAL,
        description="Source formats accepted (comma-separated) among jpeg, png, webp, avif, "
        "heif (HEIC where this build can decode it), tiff (its first page), gif (a still "
        "one): each from its bytes, never its name. Leave out what you do not take (each is "
        "one more decoder that sees untrusted bytes).")
    max_pixels: int = Field(
        100_000_000, ge=1, json_schema_extra=REFUSAL,
        description="Refuse sources with more pixels (checked on the header).")
    max_bytes: Size = Field(
        Size("64M"), ge=1, json_schema_extra=REFUSAL,
        description="Refuse source files larger than this (bytes, or 512K, 64M, 2G).")
    max_memory: Size = Field(
        Size("1G"), ge=64 << 20, json_schema_extra=REFUSAL,
        description="Most memory the sources being made at once may take together (512M, 4G), "
        "estimated on the header: a source needing more alone is refused before decoding; "
        "others wait their turn. Shared by the user's imgwarm processes on the machine. It "
        "also caps the worker processes (optimize's workers, the queue worker's pool): each "
        "holds about 72 MiB idle, and max_memory keeps room for one 200 MiB decode beside "
        "them (1G: 11 workers).")
    keep_gps: bool = Field(False, json_schema_extra=OUTPUT,
                           description="Keep the GPS block of the source's EXIF.")
    keep_maker_notes: bool = Field(False, json_schema_extra=OUTPUT,
                                   description="Keep the camera maker notes in EXIF.")
    hash_length: int = Field(
        16, ge=16, le=64, json_schema_extra=OUTPUT,
        description="Hex digits of the SHA-256 content hash in file names.")
    workers: int = Field(0, ge=0, le=256,
                         description="Sources processed at once; 0 means one per CPU core. "
                         "Never more than max_memory holds (see there): a warning says when "
                         "it cuts.")
    job_timeout: Duration = Field(
        Duration("5m"), ge=1, le=86400,
        description="Longest a source's pixel work may take in a worker process (optimize, "
        "fsck --repair), waiting for memory included: past it the process is stopped, the "
        "source fails with one line, and the next source gets a new process. Queued jobs "
        "have task_soft_time_limit and task_time_limit instead.")

    @field_validator("webp_quality", "jpeg_quality", "avif_quality", "jxl_quality",
                     mode="before")
    @classmethod
    def _quality(cls, value: Any) -> Any:
        """1..100 or auto, with one message when it is neither."""
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        if isinstance(value, bool) or not text.lstrip("-").isdigit() or \
                not 1 <= int(text) <= 100:
            raise ValueError(f"{value!r}: a quality is 1..100, or auto")
        return int(text)

    @field_validator("widths", "fallback_widths", "formats", "source_formats", mode="before")
    @classmethod
    def _csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("widths", "fallback_widths")
    @classmethod
    def _check_widths(cls, value: list[int], info: ValidationInfo) -> list[int]:
        if not value and info.field_name == "widths":
            raise ValueError("at least one width is needed")
        for width in value:
            if not 1 <= width <= 16383:
                raise ValueError(f"width {width} is outside 1..16383")
        return sorted(set(value))

    @field_validator("formats", "source_formats")
    @classmethod
    def _check_formats(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """At least one, in the table's order (outputs: the <picture> order)."""
        if not value:
            raise ValueError(f"at least one {'source ' if info.field_name != 'formats' else ''}"
                             "format is needed")
        order: tuple[str, ...] = ORDER if info.field_name == "formats" else SOURCES
        return [f for f in order if f in value]

    def options(self) -> ImageOptions:
        """These values as plain, read-only data with the same rules, for a worker process
        (which then never loads pydantic: imageoptions.py)."""
        return ImageOptions(dict(self))

    def effective_workers(self) -> int:
        return self.workers or (os.cpu_count() or 1)

    def memory_workers(self) -> int:
        """The most worker processes max_memory holds: each at its idle cost, with room left
        for one 12-megapixel photo's decode (at least one worker)."""
        return max(1, (self.max_memory - ONE_DECODE) // IDLE_WORKER)

    def workers_within_memory(self, wanted: int) -> tuple[int, str | None]:
        """``wanted`` workers, or as many as max_memory holds, with the line that says so."""
        most = self.memory_workers()
        if wanted <= most:
            return wanted, None
        return most, (f"imgwarm: {most} worker(s), not {wanted}: max_memory "
                      f"({self.max_memory >> 20} MiB) holds {most} idle worker(s) at "
                      f"{IDLE_WORKER >> 20} MiB each and one 12-megapixel photo's decode "
                      f"({ONE_DECODE >> 20} MiB); raise max_memory for more")
