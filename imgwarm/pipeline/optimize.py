"""Optimize one source, end to end against the stores: the order of the steps, written down once.

    read (size checked first) -> the record of its key: the same bytes refused before? refuse
    again; made before with the same settings and every file there? reuse -> make (make.py:
    probe ... encode, name by hash) -> place each name in the layout -> write atomically
    -> manifest. Anything that stops it removes what it wrote, unless a record now names it or
    another source claims it; a bad original read by key is recorded as a Failure, so that
    every machine can tell why, unless a manifest or tombstone is there: a failed run never
    leaves a source worse than before (docs/architecture.md, I4).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path, PurePosixPath

from imgwarm.config import ImageSettings, Settings
from imgwarm.exceptions import (
    DecoderCrashed,
    NoWorker,
    RefusedBefore,
    SourceError,
    UnreadableSource,
    too_large,
)
from imgwarm.manifest import Credits, Failure, Manifest, Record, Tombstone, Variant, named
from imgwarm.pipeline.isolate import IN_PROCESS, PixelWork
from imgwarm.pipeline.made import Encoded
from imgwarm.pipeline.naming import content_hash
from imgwarm.racepoints import reached
from imgwarm.store import Stores, local_key, read_original
from imgwarm.store.format import WRITE
from imgwarm.store.reclaim import reclaim


@dataclass(frozen=True)
class Outcome:
    manifest: Manifest
    reused: bool  # True when nothing had to be made: same bytes, same settings


def read_source(path: Path, settings: ImageSettings, within: str | None = None) -> bytes:
    """The bytes of a source file, refusing oversized files before reading them. Opened
    before it is looked at, without blocking, so that a FIFO or device swapped in for the
    file is refused rather than waited on; and, for a file found in folder ``within``, what
    was opened must still be inside it (a link may have been put in the file's place)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise UnreadableSource(str(path), f"cannot read: {error.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if within is not None and not _inside(fd, path, within):
            raise UnreadableSource(str(path), f"leads outside {within} (a link put in its "
                                   "place after the folder was read): name it to take it")
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableSource(str(path), "not a regular file")
            if info.st_size > settings.max_bytes:
                raise too_large(str(path), info.st_size, settings.max_bytes)
            return handle.read(settings.max_bytes + 1)
        except OSError as error:
            raise UnreadableSource(str(path), f"cannot read: {error.strerror}") from None


def _inside(fd: int, path: Path, folder: str) -> bool:
    """Is the file open on ``fd`` inside ``folder``? Asked of the kernel where it can say."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        opened = os.path.realpath(path)
    return os.path.commonpath([folder, opened]) == folder


def _given(credits: Credits) -> str:
    return repr(sorted(credits.arguments().items()))


def settings_digests(settings: Settings, credits: Credits) -> list[str]:
    """What a manifest depends on besides the bytes: every setting marked as changing outputs
    (``config/marks.py``) and the text given. The digest a new manifest gets first, then
    those of manifests that are current too: made with an earlier version's default of a
    setting now at its default (Settings.digests)."""
    given = _given(credits)
    return [hashlib.sha256(f"{digest}|{given}".encode()).hexdigest()[:16]
            for digest in settings.digests("output")]


@cache
def _decoders() -> str:
    import pyvips  # only when a refusal is recorded or checked: a batch leaves pixels to workers

    return f"{version('imgwarm')}|{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}"


def failure_digest(settings: Settings, credits: Credits) -> str:
    """What a refusal depends on besides the bytes: the settings marked as changing outputs or
    refusals, the text given, and the decoders (a newer imgwarm or libvips may read what this
    one could not)."""
    seed = f"{settings.digest('output', 'refusal')}|{_given(credits)}|{_decoders()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _publish(files: list[Encoded], stores: Stores, created: list[PurePosixPath]) -> list[Variant]:
    """Place and write every file; each one this run created is added to ``created`` as it
    is (the others were there), so that a failure leaves the caller knowing what to undo."""
    variants: list[Variant] = []
    for file in files:
        path = stores.path_of(file.name)
        variants.append(Variant(format=file.format, width=file.width, height=file.height,
                                bytes=len(file.data), path=str(path), quality=file.quality,
                                score=None if file.score is None else round(file.score, 2),
                                hdr=file.hdr, predicted=file.predicted,
                                full_chroma=file.full_chroma))
        if stores.origin.write(path, file.data):
            created.append(path)
    return variants


def _undo(key: str, mine: set[str], created: list[PurePosixPath], stores: Stores) -> None:
    """After a failed make: release the claim markers this run created (``mine``: those it
    found there are another run's of the same key) and remove the files it created, except
    what the key's record names as it now stands and what a source claims (``reclaim`` looks
    before and after).

    The record is read again after the release, and what it names is claimed again: another
    run of this key may have published since it claimed (its markers were this run's, and it
    found them there). Should that run publish after this read, it makes them again itself
    (``_claims_kept``). When the record cannot be read, or a claim not released, nothing is
    removed (and what was released is claimed back when the second read fails: a claim no
    record stands behind is fsck's): a file left over is gc's, a file lost is not."""
    references = stores.manifests.references
    try:
        standing = named(stores.manifests.read(key))
        released = sorted(mine - standing)
        reached("optimize.undoing")
        references.release(key, released)
        reached("optimize.released")
        try:
            standing = named(stores.manifests.read(key))
        except Exception:
            references.claim(key, released)
            raise
        references.claim(key, sorted(standing.intersection(released)))
    except Exception:  # the first error is the one to report
        return
    for path in created:
        if str(path) not in standing:
            with contextlib.suppress(Exception):
                reclaim(stores.origin, references, str(path))


def _claims_kept(key: str, shared: list[str], files: list[Encoded], stores: Stores) -> None:
    """After a manifest is written: the markers this run's claim found there already (another
    run of the same key made them) are made again, then their files are written again where
    missing (a write keeps a file already there). That other run may fail and undo: it
    releases its markers and removes the files it created, unless the record names them when
    it reads it again. Its release before this claim: the claim stands. After: its read sees
    this manifest. A file it removed before this write is written again here; one it removes
    after sees this claim, and is put back (``reclaim``). Nothing to do, and no request,
    when this run created every marker, as a run alone does."""
    if not shared:
        return
    stores.manifests.references.claim(key, shared)
    for file in files:
        path = stores.path_of(file.name)
        if str(path) in shared:
            stores.origin.write(path, file.data)  # (conditional: where it is, nothing written)


def optimize_bytes(
    data: bytes, *, key: str, name: str, settings: Settings, stores: Stores,
    credits: Credits | None = None, pixels: PixelWork = IN_PROCESS, again: bool = False,
) -> Outcome:
    """Turn one source's bytes into its variants and manifest. ``name`` is the source's file
    name (for the slug and messages); ``credits`` override what the source's EXIF says;
    ``pixels`` is where the pixel work runs (``isolate.py``); ``again``: an earlier attempt
    of this same job may have been killed (a queued job handed out again), so a manifest
    found current is announced in the journal again (it may have been written just before
    that attempt died, and never announced)."""
    given = credits or Credits()
    source_sha = content_hash(data)
    current = settings_digests(settings, given)
    digest = current[0]
    previous = stores.manifests.read(key)
    if (
        isinstance(previous, Failure)
        and previous.source_sha256 == source_sha
        and previous.settings_digest == failure_digest(settings, given)
    ):
        raise RefusedBefore(name, previous.failed)  # no need to decode it again
    if (
        isinstance(previous, Manifest)
        and previous.source_sha256 == source_sha
        and previous.settings_digest in current
        and all(stores.origin.exists(v.path) for v in previous.variants)
    ):
        if previous.placeholder is None:  # made before placeholders: add it, once
            found = pixels.preview(data, name, settings.image)
            updated = previous.model_copy(update={"placeholder": found})
            stores.manifests.put(updated, previous)
            previous = updated
        elif again:
            stores.manifests.announce(key)
        return Outcome(previous, reused=True)
    made = pixels.make(data, name, settings.image, given)
    # Claimed before they are written (references.py): a delete or gc that runs meanwhile
    # sees the claim and leaves a variant of the same name alone.
    fresh = sorted({str(stores.path_of(f.name)) for f in made.files} - named(previous))
    created: list[PurePosixPath] = []
    mine: set[str] = set()  # the claim markers this run created
    published = False
    try:
        stores.manifests.references.claim(key, fresh, mine)
        reached("optimize.claimed")
        variants = _publish(made.files, stores, created)
        reached("optimize.written")
        manifest = Manifest(
            key=key, source_sha256=source_sha, width=made.width,
            height=made.height, description=made.credits.description,
            copyright=made.credits.copyright, artist=made.credits.artist,
            settings_digest=digest, variants=variants, warnings=made.warnings,
            placeholder=made.placeholder,
        )
        if manifest != previous:  # files were missing, the manifest was right: keep it
            _not_taken_down(key, name, previous, stores)
            stores.manifests.put(manifest, previous, claimed=True)
            published = True  # from here on its manifest stands: nothing is undone
            reached("optimize.published")
            _claims_kept(key, [p for p in fresh if p not in mine], made.files, stores)
    except BaseException:  # whatever stops it, a failed source leaves nothing behind
        if not published:
            _undo(key, mine, created, stores)
        raise
    return Outcome(manifest, reused=False)


def _not_taken_down(key: str, name: str, previous: Record | None, stores: Stores) -> None:
    """A takedown that came while this source was being made (its original removed: a bucket
    event's delete, or ``imgwarm delete``) is not undone by publishing it after: the files
    made are removed as for any failure (UnreadableSource, never recorded over the
    tombstone)."""
    now = stores.manifests.read(key)
    if isinstance(now, Tombstone) and now != previous:
        raise UnreadableSource(name, "taken down while it was being made (imgwarm delete, or "
                               "its original removed): not published")


def optimize_file(
    path: Path, *, settings: Settings, stores: Stores, credits: Credits | None = None,
    key: str | None = None, within: str | None = None, pixels: PixelWork = IN_PROCESS,
) -> Outcome:
    """``optimize_bytes`` of a file; ``within``: the folder it was found in (see
    ``read_source``). FormatTooNew first when the store is newer than this code writes."""
    stores.check(WRITE)  # (kept by the gate: no look at the store a source)
    data = read_source(path, settings.image, within)
    return optimize_bytes(
        data, key=key or local_key(path), name=str(path), settings=settings, stores=stores,
        credits=credits, pixels=pixels,
    )


def optimize_key(
    key: str, *, settings: Settings, stores: Stores, credits: Credits | None = None,
    pixels: PixelWork = IN_PROCESS, again: bool = False,
) -> Outcome:
    """Make the variants of the original stored at ``key`` in the origin. A bad image is
    recorded as a failure in the manifest store, so every machine can tell why. ``again``:
    as ``optimize_bytes``'s. FormatTooNew first when the store is newer than this code
    writes (nothing is recorded then: a newer version makes it)."""
    stores.check(WRITE)
    try:
        data = read_original(stores.origin, key, settings.image.max_bytes)
    except SourceError as error:  # missing, or too large to read: it may be replaced
        record_failure(key, None, error.reason, settings=settings, stores=stores,
                       credits=credits)
        raise
    try:
        return optimize_bytes(
            data, key=key, name=key, settings=settings, stores=stores, credits=credits,
            pixels=pixels, again=again,
        )
    except RefusedBefore:
        raise  # already recorded: nothing to write
    except SourceError as error:
        # A crash, a deadline or no worker is recorded without the bytes: it may have come
        # from outside (out of memory, a busy machine), so the same bytes are tried again.
        tried = None if isinstance(error, DecoderCrashed | NoWorker) else data
        record_failure(key, tried, error.reason, settings=settings, stores=stores,
                       credits=credits)
        raise


def record_failure(
    key: str, data: bytes | None, reason: str, *, settings: Settings, stores: Stores,
    credits: Credits | None = None,
) -> None:
    """Keep why ``key`` could not be made, where every machine finds it. With the bytes that
    failed (a bad image), the same bytes and settings are later refused without a decode;
    without them (missing, too large, a worker that kept dying) the failure may pass.

    Never over a manifest or a tombstone: a failed read or make must not leave a source worse
    than before (its variants would lose their claims, and gc would take them), nor undo a
    takedown; the error reaches the caller all the same."""
    previous = stores.manifests.read(key)
    if isinstance(previous, Manifest | Tombstone):
        return
    stores.manifests.put(Failure(
        key=key, source_sha256=None if data is None else content_hash(data),
        settings_digest=failure_digest(settings, credits or Credits()),
        failed=reason,
    ), previous)
