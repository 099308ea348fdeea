"""imgwarm: photos in, compact web variants out, named by content hash, laid out for nginx.

Web apps call :func:`optimize` on upload (in-process)::

    import imgwarm
    manifest = imgwarm.optimize("upload.jpg", description="Red bicycle", widths=[320, 640])
    for variant in manifest.variants:
        print(variant.format, variant.width, variant.path)

or, with workers (``imgwarm worker``) on a Redis broker, queue the stored original's key::

    job = imgwarm.enqueue("uploads/2026/bike.jpg", description="Red bicycle")

Every error class is here at once (imgwarm.exceptions imports nothing: ``except
imgwarm.SourceError``); the other names are imported on first use (PEP 562): ``import
imgwarm`` loads neither libvips, Celery nor pydantic.
"""

from __future__ import annotations

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
    "BrokerError", "ConfigValueError", "CorruptImage", "Credits", "DecoderCrashed", "FormatTooNew",
    "ImgwarmError",
    "JobFailed", "JobTimedOut", "LayoutError", "LimitExceeded", "LogFormatError", "MalformedEvent",
    "Manifest", "NginxError", "NoWorker", "NotAnOriginal", "ObjectTooLarge", "PagesError",
    "PictureError", "RefusedBefore", "Settings", "SettingsError", "SourceError", "StorageError",
    "TooDeep",
    "TransientStorageError", "UnknownSource", "UnreadableSource", "UnsupportedFormat", "Variant",
    "WarmBusy", "__version__",
    "delete", "enqueue", "enqueue_delete", "fsck", "gc", "load_settings", "optimize", "picture",
    "register_jinja", "warm",
]
_WHERE = {
    "Credits": "imgwarm.manifest", "Manifest": "imgwarm.manifest", "Variant": "imgwarm.manifest",
    "Settings": "imgwarm.config", "load_settings": "imgwarm.config",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("imgwarm")
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'imgwarm' has no attribute {name!r}")


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
    """Make the variants of one image and return its manifest, in the configured origin.

    With the local origin (the default), ``path`` is an image file; ``key`` names the source
    in the manifest store (default: its absolute path). With ``origin = s3``
    (IMGWARM_ORIGIN=s3), ``path`` is the key of an original already in the bucket, as
    ``imgwarm optimize`` and the workers take it; a local file (a ``Path``) or a ``key``
    that differs is refused with one line (SettingsError): upload the original first.

    ``options`` are settings by name (``widths=[320, 640]``, ``webp_quality=75``...), applied
    over ``settings`` (default: loaded from imgwarm.toml and IMGWARM_* variables). Raises
    SourceError for a bad image (permanent), SettingsError for text that cannot be stored,
    LayoutError for an unsafe key, and other ImgwarmError subclasses for the rest.
    """
    from imgwarm.manifest import Credits

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
    """The ``<picture>`` tag of an optimized source (its manifest, as ``optimize`` returns
    it): AVIF and WebP ``<source>``s and a JPEG ``<img>``, every width in ``srcset``, width
    and height set, the placeholder as its background; ``eager`` for the hero, ``low`` for
    an image below the fold on small screens that large ones may show. Every string
    from the manifest is escaped; PictureError for a manifest that cannot make a safe tag,
    SettingsError for an option that cannot (named: ``sizes``, ``css_class``, ``base_url``)."""
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
) -> Job:
    """Queue the original stored at ``key`` in the origin (S3 key under the prefix, or path
    under origin_root) for the workers, and return at once. ``job.wait()`` blocks until it
    ends; ``imgwarm status KEY`` tells where it stands. Raises LayoutError for an unsafe key
    and BrokerError when Redis cannot be reached (nothing is queued then)."""
    from imgwarm.workers.client import enqueue as enqueue_job

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
                   original: bool = False) -> DeleteJob:
    """Queue the takedown of ``key`` for the workers (for a web app's delete handler);
    ``job.wait()`` returns what it removed. Raises LayoutError for an unsafe key and
    BrokerError when Redis cannot be reached."""
    from imgwarm.workers.client import enqueue_delete as send

    return send(key, original=original, settings=settings)


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
