"""Optimize one source: the order of the steps, written down once.

    read -> probe (format, limits, on the header) -> decode (shrink-on-load, strict)
    -> fit (largest width) -> to_srgb -> [in memory] -> upright -> for each width: fit
    -> encode -> EXIF -> name by hash -> write atomically -> manifest
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import (
    CorruptImage,
    LimitExceeded,
    RefusedBefore,
    SourceError,
    UnreadableSource,
    too_large,
)
from imgwarm.pipeline import metadata
from imgwarm.pipeline.budget import budget
from imgwarm.pipeline.colour import to_srgb
from imgwarm.pipeline.decode import decode
from imgwarm.pipeline.encode import EXTENSIONS, MAX_SIDE, Frame, encode
from imgwarm.pipeline.exif import read_exif
from imgwarm.pipeline.layout import Layout
from imgwarm.pipeline.manifest import Failure, Manifest, Variant
from imgwarm.pipeline.memory import decode_cost, describe
from imgwarm.pipeline.naming import content_hash, file_name, slug_for
from imgwarm.pipeline.orient import upright
from imgwarm.pipeline.origin import Stores, read_original
from imgwarm.pipeline.probe import Probe, probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.storage import Store
from imgwarm.pipeline.text import printable
from imgwarm.pipeline.variants import height_for, plan_widths
from imgwarm.pipeline.vipsutil import LIBVIPS, clear_errors, vips_reason


@dataclass(frozen=True)
class Outcome:
    manifest: Manifest
    reused: bool  # True when nothing had to be made: same bytes, same settings


@dataclass(frozen=True)
class _Output:
    variant: Variant
    data: bytes


def local_key(path: Path) -> str:
    """The manifest key of a local file: its absolute path, so any working folder finds it.
    (realpath, not Path.resolve: a symlink loop must not raise here.)"""
    return os.path.realpath(path)


def read_source(path: Path, settings: Settings) -> bytes:
    """The bytes of a source file, refusing oversized files before reading them. Opened
    before it is looked at, without blocking, so that a FIFO or device swapped in for the
    file is refused rather than waited on."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise UnreadableSource(str(path), f"cannot read: {error.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableSource(str(path), "not a regular file")
            if info.st_size > settings.max_bytes:
                raise too_large(str(path), info.st_size, settings.max_bytes)
            return handle.read(settings.max_bytes + 1)
        except OSError as error:
            raise UnreadableSource(str(path), f"cannot read: {error.strerror}") from None


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


def _settings_digest(settings: Settings, credits: metadata.Credits) -> str:
    given = repr(sorted((k, v) for k, v in vars(credits).items() if v is not None))
    return hashlib.sha256(f"{settings.output_digest()}|{given}".encode()).hexdigest()[:16]


def _failure_digest(settings: Settings, credits: metadata.Credits) -> str:
    """What a refusal depends on besides the bytes: the output settings, the limits, and the
    decoders (a newer imgwarm or libvips may read what this one could not)."""
    from imgwarm import __version__

    limits = (f"{settings.max_pixels}|{settings.max_bytes}|{settings.accept_png}|"
              f"{settings.max_memory}")
    decoders = f"{__version__}|{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}"
    seed = f"{_settings_digest(settings, credits)}|{limits}|{decoders}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _plan(name: str, info: Probe, settings: Settings) -> tuple[list[int], int]:
    """The widths to make and the memory it takes; refuses, on the header, what no width can
    hold or what needs more memory than the whole budget."""
    full_w, full_h = info.displayed_width, info.displayed_height
    max_side = min(MAX_SIDE[f] for f in settings.formats)
    widths = plan_widths(full_w, full_h, settings.widths, max_side)
    if not widths:
        raise LimitExceeded(
            name, f"{full_w}x{full_h} is too narrow for its height: even 1 pixel wide, a "
            f"variant would be over {max_side} pixels tall, the most "
            f"{'/'.join(settings.formats)} can hold"
        )
    cost = decode_cost(info, widths[-1], height_for(widths[-1], full_w, full_h))
    if cost > settings.max_memory:
        held = ""
        if info.buffered:
            held = ("a progressive or multi-scan JPEG holds all of its coefficients; "
                    if info.format == "jpeg" else "an interlaced PNG is decoded whole; ")
        raise LimitExceeded(
            name, f"making it needs about {describe(cost)} of memory ({held}estimated on the "
            f"header), over max_memory ({describe(settings.max_memory)}); refused before "
            "decoding"
        )
    return widths, cost


def _encode_all(
    name: str, info: Probe, exif: bytes | None, settings: Settings, layout: Layout,
) -> list[_Output]:
    widths, cost = _plan(name, info, settings)
    full_w, full_h = info.displayed_width, info.displayed_height
    with budget(settings.max_memory).reserve(cost):
        master = render_master(info, widths[-1], height_for(widths[-1], full_w, full_h), name)
        slug = slug_for(printable(name))
        outputs: list[_Output] = []
        for width in widths:
            resized = fit(master, width, height_for(width, full_w, full_h))
            # Resample once into memory; every encoder then reads the same pixels.
            frame = Frame(resized if resized is master else resized.copy_memory())
            image = frame.image
            for fmt in settings.formats:
                encoded = encode(frame, fmt, settings, exif)
                digest = content_hash(encoded)
                path = layout.path_for(
                    file_name(slug, digest, EXTENSIONS[fmt], settings.hash_length), digest)
                variant = Variant(format=fmt, width=image.width, height=image.height,
                                  bytes=len(encoded), path=str(path))
                outputs.append(_Output(variant, encoded))
    return outputs


def _publish(outputs: list[_Output], store: Store) -> list[PurePosixPath]:
    """Write every file or none: files this run created are removed if any write fails.
    Returns the files this run created (the others were already there)."""
    created: list[PurePosixPath] = []
    try:
        for output in outputs:
            path = PurePosixPath(output.variant.path)
            if store.write(path, output.data):
                created.append(path)
    except BaseException:
        _remove(created, store)
        raise
    return created


def _remove(paths: list[PurePosixPath], store: Store) -> None:
    for path in paths:
        with contextlib.suppress(Exception):  # the first error is the one to report
            store.delete(path)


@dataclass(frozen=True)
class _Made:
    info: Probe
    credits: metadata.Credits
    outputs: list[_Output]
    warnings: list[str]


def _make(
    data: bytes, name: str, settings: Settings, layout: Layout, given: metadata.Credits,
) -> _Made:
    """The pixel work: probe, decode, transform, encode. Raises SourceError or pyvips.Error."""
    info = probe(data, name, settings)
    exif_source = read_exif(info.exif)
    final = given.merged_over(metadata.credits_from_exif(exif_source))
    exif, left_out = metadata.build_exif(
        final, exif_source, keep_gps=settings.keep_gps, keep_maker_notes=settings.keep_maker_notes
    )
    outputs = _encode_all(name, info, exif, settings, layout)
    return _Made(info, final, outputs, [*info.notes, *left_out])


def _make_checked(
    data: bytes, name: str, settings: Settings, layout: Layout, given: metadata.Credits,
) -> _Made:
    """``_make``; a failure is looked at again with no other libvips work going on, so that
    its message is this image's own (libvips has one error buffer per process)."""
    try:
        with LIBVIPS.shared():
            return _make(data, name, settings, layout, given)
    except (pyvips.Error, CorruptImage):
        pass
    with LIBVIPS.alone():
        clear_errors()
        try:
            return _make(data, name, settings, layout, given)
        except pyvips.Error as error:
            raise CorruptImage(name, vips_reason(error)) from None


def optimize_bytes(
    data: bytes, *, key: str, name: str, settings: Settings, stores: Stores,
    credits: metadata.Credits | None = None,
) -> Outcome:
    """Turn one source's bytes into its variants and manifest. ``name`` is the source's file
    name (for the slug and messages); ``credits`` override what the source's EXIF says."""
    given = credits or metadata.Credits()
    source_sha = content_hash(data)
    digest = _settings_digest(settings, given)
    previous = stores.manifests.record(key)
    if (
        isinstance(previous, Failure)
        and previous.source_sha256 == source_sha
        and previous.settings_digest == _failure_digest(settings, given)
    ):
        raise RefusedBefore(name, previous.failed)  # no need to decode it again
    if (
        isinstance(previous, Manifest)
        and previous.source_sha256 == source_sha
        and previous.settings_digest == digest
        and all(stores.origin.exists(v.path) for v in previous.variants)
    ):
        return Outcome(previous, reused=True)
    made = _make_checked(data, name, settings, stores.layout, given)
    created = _publish(made.outputs, stores.origin)
    try:
        manifest = Manifest(
            key=key, source_sha256=source_sha, width=made.info.displayed_width,
            height=made.info.displayed_height, description=made.credits.description,
            copyright=made.credits.copyright, artist=made.credits.artist,
            settings_digest=digest, variants=[o.variant for o in made.outputs],
            warnings=made.warnings,
        )
        if manifest != previous:  # files were missing, the manifest was right: keep it
            stores.manifests.put(manifest)
    except BaseException:  # whatever stops it, a failed source leaves nothing behind
        _remove(created, stores.origin)
        raise
    return Outcome(manifest, reused=False)


def optimize_file(
    path: Path, *, settings: Settings, stores: Stores, credits: metadata.Credits | None = None,
    key: str | None = None,
) -> Outcome:
    data = read_source(path, settings)
    return optimize_bytes(
        data, key=key or local_key(path), name=str(path), settings=settings, stores=stores,
        credits=credits,
    )


def optimize_key(
    key: str, *, settings: Settings, stores: Stores, credits: metadata.Credits | None = None,
) -> Outcome:
    """Make the variants of the original stored at ``key`` in the origin. A bad image is
    recorded as a failure in the manifest store, so every machine can tell why."""
    try:
        data = read_original(stores.origin, key, settings)
    except SourceError as error:  # missing, or too large to read: it may be replaced
        record_failure(key, None, error.reason, settings=settings, stores=stores,
                       credits=credits)
        raise
    try:
        return optimize_bytes(
            data, key=key, name=key, settings=settings, stores=stores, credits=credits
        )
    except RefusedBefore:
        raise  # already recorded: nothing to write
    except SourceError as error:
        record_failure(key, data, error.reason, settings=settings, stores=stores,
                       credits=credits)
        raise


def record_failure(
    key: str, data: bytes | None, reason: str, *, settings: Settings, stores: Stores,
    credits: metadata.Credits | None = None,
) -> None:
    """Keep why ``key`` could not be made, where every machine finds it. With the bytes that
    failed (a bad image), the same bytes and settings are later refused without a decode;
    without them (missing, too large, a worker that kept dying) the failure may pass."""
    stores.manifests.put(Failure(
        key=key, source_sha256=None if data is None else content_hash(data),
        settings_digest=_failure_digest(settings, credits or metadata.Credits()),
        failed=reason,
    ))
