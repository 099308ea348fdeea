"""imgwarm: photos in, compact web variants out, named by content hash, laid out for nginx.

Web apps call :func:`optimize_file` on upload (in-process), or :func:`optimize_key` for an
original already in the origin (local directory or S3 bucket)::

    import imgwarm
    manifest = imgwarm.optimize_file("upload.jpg", description="Red bicycle", widths=[320, 640])
    for variant in manifest.variants:
        print(variant.format, variant.width, variant.path)

or, with workers (``imgwarm worker``) on a Redis broker, queue the stored original's key::

    job = imgwarm.enqueue("uploads/2026/bike.jpg", description="Red bicycle")

Every error class is here at once (imgwarm.exceptions imports nothing: ``except
imgwarm.SourceError``); the other names are imported on first use (PEP 562): ``import
imgwarm`` loads neither libvips, Celery nor pydantic. Every type a function returns or takes
is exported too (``from imgwarm import WarmReport``), and every function that uses settings
takes them by name as ``**options`` (``widths=[320]``), an unknown name being one
SettingsError that names it.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imgwarm.exceptions import (
    BrokerError,
    ConfigValueError,
    CorruptImage,
    DecoderCrashed,
    FormatTooNew,
    ImgwarmError,
    JobFailed,
    JobTimedOut,
    LayoutError,
    LimitExceeded,
    LogFormatError,
    MalformedEvent,
    NginxError,
    NotAnOriginal,
    NoWorker,
    ObjectTooLarge,
    PagesError,
    PictureError,
    RefusedBefore,
    SettingsError,
    SourceError,
    StorageError,
    TooDeep,
    TransientError,
    TransientStorageError,
    UnknownSource,
    UnreadableSource,
    UnsupportedFormat,
    WarmBusy,
)

if TYPE_CHECKING:
    from imgwarm.cache.warm import WarmReport
    from imgwarm.config import Settings, load_settings
    from imgwarm.lifecycle.delete import Deletion
    from imgwarm.lifecycle.fsck import FsckReport
    from imgwarm.lifecycle.gc import GcReport
    from imgwarm.manifest import Credits, Manifest, Variant
    from imgwarm.workers.client import DeleteJob, Job

__all__ = [
    "BrokerError", "ConfigValueError", "CorruptImage", "Credits", "DecoderCrashed", "DeleteJob",
    "Deletion", "FormatTooNew", "FsckReport", "GcReport", "ImgwarmError", "Job", "JobFailed",
    "JobTimedOut", "LayoutError", "LimitExceeded", "LogFormatError", "MalformedEvent",
    "Manifest", "NginxError", "NoWorker", "NotAnOriginal", "ObjectTooLarge", "PagesError",
    "PictureError", "RefusedBefore", "Settings", "SettingsError", "SourceError", "StorageError",
    "TooDeep", "TransientError", "TransientStorageError", "UnknownSource", "UnreadableSource",
    "UnsupportedFormat", "Variant", "WarmBusy", "WarmReport", "__version__",
    "delete", "enqueue", "enqueue_delete", "fsck", "gc", "load_settings", "optimize",
    "optimize_file", "optimize_key", "picture", "register_jinja", "warm",
]
# Where each lazily imported name lives (imported on first use: Job and DeleteJob bring Celery).
_WHERE = {
    "Credits": "imgwarm.manifest", "Manifest": "imgwarm.manifest", "Variant": "imgwarm.manifest",
    "Settings": "imgwarm.config", "load_settings": "imgwarm.config",
    "WarmReport": "imgwarm.cache.warm", "Deletion": "imgwarm.lifecycle.delete",
    "FsckReport": "imgwarm.lifecycle.fsck", "GcReport": "imgwarm.lifecycle.gc",
    "Job": "imgwarm.workers.client", "DeleteJob": "imgwarm.workers.client",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("imgwarm")
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'imgwarm' has no attribute {name!r}")


def optimize_file(
    path: str | Path,
    *,
    key: str | None = None,
    settings: Settings | None = None,
    description: str | None = None,
    copyright: str | None = None,
    artist: str | None = None,
    **options: Any,
) -> Manifest:
    """Make the variants of the local image file ``path`` and return its manifest; the file
    is read from this machine's disk whatever the origin, and the variants and manifest go to
    the configured origin (local directory, or S3 with IMGWARM_ORIGIN=s3).

    ``key`` names the source in the manifest store: by default its absolute path with the
    local origin; with the S3 origin it is required (the name the bucket knows it by:
    SettingsError without it). ``options`` are settings by name (``widths=[320, 640]``,
    ``webp_quality=75``...), applied over ``settings`` (default: loaded from imgwarm.toml and
    IMGWARM_* variables). Raises SourceError for a bad image (permanent), SettingsError for an
    unknown option or text that cannot be stored, LayoutError for an unsafe key, and other
    ImgwarmError subclasses for the rest."""
    from imgwarm.manifest import Credits
    from imgwarm.pipeline.optimize import optimize_file as run
    from imgwarm.store import Stores, check_source_key

    settings = _settings(settings, options)
    credits = Credits.given(description=description, copyright=copyright, artist=artist)
    if settings.store.origin == "s3":  # (a local store knows a file by its absolute path)
        if key is None:
            raise SettingsError(
                f"origin = s3 (IMGWARM_ORIGIN): optimize_file needs key= for {path} (the name "
                f"of the source in the bucket)")
        check_source_key(key)
    stores = Stores.for_settings(settings.store)
    manifest = run(Path(path), settings=settings, stores=stores, credits=credits,
                   key=key).manifest
    _tell(settings, "published", manifest)
    return manifest


def optimize_key(
    key: str,
    *,
    settings: Settings | None = None,
    description: str | None = None,
    copyright: str | None = None,
    artist: str | None = None,
    **options: Any,
) -> Manifest:
    """Make the variants of the original already stored at ``key`` in the configured origin
    (a path under origin_root, or a key under the S3 prefix), as ``imgwarm optimize`` and the
    workers do, and return its manifest. A bad image is recorded as a failure in the manifest
    store. ``options``: settings by name, as ``optimize_file``'s. Raises UnreadableSource when
    no original is there, LayoutError for an unsafe key, SourceError for a bad image."""
    from imgwarm.manifest import Credits
    from imgwarm.pipeline.optimize import optimize_key as run
    from imgwarm.store import Stores, check_source_key

    settings = _settings(settings, options)
    credits = Credits.given(description=description, copyright=copyright, artist=artist)
    check_source_key(key)
    manifest = run(key, settings=settings, stores=Stores.for_settings(settings.store),
                   credits=credits).manifest
    _tell(settings, "published", manifest)
    return manifest


def optimize(
    path: str | Path,
    *,
    settings: Settings | None = None,
    key: str | None = None,
    description: str | None = None,
    copyright: str | None = None,
    artist: str | None = None,
    **options: Any,
) -> Manifest:
    """Deprecated (DeprecationWarning): ``optimize_file`` for a local file, ``optimize_key``
    for an original in the origin. Behaves as before: with the local origin ``path`` is an
    image file (``key``: its name in the manifest store); with ``origin = s3`` it is the key
    of an original in the bucket, and a local file (a ``Path``) or a ``key`` that differs is
    refused with one line (SettingsError)."""
    from imgwarm.manifest import Credits

    warnings.warn(
        "imgwarm.optimize is deprecated: use imgwarm.optimize_file(path) for a local file or "
        "imgwarm.optimize_key(key) for an original in the origin", DeprecationWarning,
        stacklevel=2)
    settings = _settings(settings, options)
    credits = Credits.given(description=description, copyright=copyright, artist=artist)
    manifest = _optimize(path, settings, key, credits)
    _tell(settings, "published", manifest)
    return manifest


def _optimize(path: str | Path, settings: Settings, key: str | None,
              credits: Credits) -> Manifest:
    from imgwarm.pipeline.optimize import optimize_file, optimize_key
    from imgwarm.store import Stores, check_source_key

    if settings.store.origin == "s3":
        if isinstance(path, Path):
            raise SettingsError(
                f"origin = s3 (IMGWARM_ORIGIN): optimize takes the key of an original in the "
                f"bucket, not a local file ({path}): upload it first")
        if key is not None and key != path:
            raise SettingsError(
                f"origin = s3 (IMGWARM_ORIGIN): the source is known by its key in the bucket "
                f"({path!r}), not by key={key!r}")
        check_source_key(path)
        return optimize_key(path, settings=settings, stores=Stores.s3(settings.store),
                            credits=credits).manifest
    return optimize_file(
        Path(path), settings=settings, stores=Stores.local(settings.store), credits=credits,
        key=key,
    ).manifest


def _tell(settings: Settings, kind: str, *what: Any) -> None:
    """The in-process ``published`` or ``deleted`` event, added to the events stream when
    events_redis_url is set (never failing the call: the outbox logs what it could not)."""
    from imgwarm.events import out

    outbox = out.Outbox(settings, explicit_only=True)
    if outbox.enabled:
        outbox.add(out.published(*what) if kind == "published" else out.deleted(*what))


def _settings(settings: Settings | None, options: dict[str, Any]) -> Settings:
    """``settings`` with ``options`` (public names) over them; by default, loaded from
    imgwarm.toml and IMGWARM_* variables."""
    from imgwarm.config import load_settings

    if settings is None:
        return load_settings(**options)
    return settings.updated(**options) if options else settings


def warm(
    *,
    settings: Settings | None = None,
    access_logs: list[str] | None = None,
    hot_list: str | Path | None = None,
    full: bool = False,
    dry_run: bool = False,
    **options: Any,
) -> WarmReport:
    """Fill the cache tiers from the origin once (what ``imgwarm warm`` does) and return
    what was done. ``options`` are settings by name (``ram_budget="2G"``...)."""
    from imgwarm.cache.warm import warm as run

    settings = _settings(settings, options)
    return run(settings, access_logs=access_logs, full=full, dry_run=dry_run,
               hot_list=Path(hot_list) if hot_list is not None else None)


def picture(
    manifest: Manifest,
    *,
    sizes: str = "100vw",
    alt: str | None = None,
    eager: bool = False,
    low: bool = False,
    css_class: str | None = None,
    base_url: str = "/",
) -> str:
    """The ``<picture>`` tag of an optimized source (its manifest, as ``optimize_file``
    returns it): AVIF and WebP ``<source>``s and a JPEG ``<img>``, every width in ``srcset``, width
    and height set, the placeholder as its background; ``eager`` for the hero, ``low`` for
    an image below the fold on small screens that large ones may show. Every string
    from the manifest is escaped; PictureError for a manifest that cannot make a safe tag,
    SettingsError for an option that cannot (named: ``sizes``, ``css_class``, ``base_url``).
    It reads the manifest alone, so it takes no settings (no ``**options``)."""
    from imgwarm.serve.picture import picture as render

    return render(manifest, sizes=sizes, alt=alt, eager=eager, css_class=css_class,
                  base_url=base_url, low=low)


def register_jinja(environment: Any) -> None:
    """Add the ``picture`` filter to a Jinja2 Environment: ``{{ manifest | picture }}``."""
    from imgwarm.serve.picture import register

    register(environment)


def enqueue(
    key: str,
    *,
    settings: Settings | None = None,
    description: str | None = None,
    copyright: str | None = None,
    artist: str | None = None,
    **options: Any,
) -> Job:
    """Queue the original stored at ``key`` in the origin (S3 key under the prefix, or path
    under origin_root) for the workers, and return at once. ``job.wait()`` blocks until it
    ends; ``imgwarm status KEY`` tells where it stands. ``options``: settings by name (the
    broker's, ``redis_url=...``; the image settings are the workers' own). Raises LayoutError
    for an unsafe key and BrokerError when Redis cannot be reached (nothing is queued then)."""
    from imgwarm.workers.client import enqueue as enqueue_job

    settings = _settings(settings, options)
    return enqueue_job(key, description=description, copyright=copyright, artist=artist,
                       settings=settings)


def delete(
    key: str | Path, *, settings: Settings | None = None, original: bool = False,
    **options: Any,
) -> Deletion:
    """Take a source down at once (what ``imgwarm delete`` does): its manifest becomes a
    tombstone, its variants leave the origin (local or S3) unless another source names them,
    and every cache server's next ``warm`` removes them from its tiers. ``key``: the origin
    key, or with a local origin the file that was optimized. ``original`` removes the
    original too. Safe to call again; raises LayoutError for an unsafe key, UnknownSource
    when nothing is known of it, StorageError when a store fails (call it again)."""
    from imgwarm.lifecycle.delete import delete as run
    from imgwarm.lifecycle.delete import resolve_key
    from imgwarm.store import Stores

    settings = _settings(settings, options)
    stores = Stores.for_settings(settings.store)
    done = run(resolve_key(key, stores), stores, original=original)
    _tell(settings, "deleted", done.key, done.variants)
    return done


def enqueue_delete(key: str, *, settings: Settings | None = None,
                   original: bool = False, **options: Any) -> DeleteJob:
    """Queue the takedown of ``key`` for the workers (for a web app's delete handler);
    ``job.wait()`` returns what it removed. ``options``: settings by name. Raises LayoutError
    for an unsafe key and BrokerError when Redis cannot be reached."""
    from imgwarm.workers.client import enqueue_delete as send

    return send(key, original=original, settings=_settings(settings, options))


def fsck(
    *, settings: Settings | None = None, repair: bool = False, **options: Any,
) -> FsckReport:
    """Check the store for bad states (a manifest naming a missing file, a claim missing or
    with no record behind it, a damaged record) and, with ``repair``, set right what is safe
    to; what ``imgwarm fsck`` does."""
    from imgwarm.lifecycle.fsck import check
    from imgwarm.store import Stores

    settings = _settings(settings, options)
    return check(Stores.for_settings(settings.store), repair=repair, settings=settings)


def gc(
    *, settings: Settings | None = None, grace: float | None = None, full: bool = False,
    dry_run: bool = False, now: float | None = None, **options: Any,
) -> GcReport:
    """Remove the variants no manifest names once unnamed for ``grace`` seconds (default:
    the gc_grace setting, 7 days), from the origin and this machine's tiers; what
    ``imgwarm gc`` does. ``now``: the clock (for tests)."""
    from imgwarm.lifecycle.gc import gc as run

    settings = _settings(settings, options)
    return run(settings, grace=grace, now=now, full=full, dry_run=dry_run)
