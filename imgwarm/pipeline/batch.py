"""Batch: many sources at once, in parallel, each succeeding or failing on its own."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError, UnreadableSource
from imgwarm.pipeline.manifest import Manifest
from imgwarm.pipeline.metadata import Credits
from imgwarm.pipeline.optimize import Stores, optimize_file

# What a folder is searched for. A file named on the command line is taken whatever its name.
IMAGE_SUFFIXES = frozenset([".jpg", ".jpeg", ".jpe", ".jfif", ".png"])


@dataclass(frozen=True)
class SourceResult:
    source: str  # as given (or as found under a given folder)
    manifest: Manifest | None = None
    error: str | None = None
    reused: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def collect_sources(arguments: Iterable[str], skip: Iterable[Path] = ()) -> list[Path]:
    """Files as named, and JPEG and PNG files found recursively (sorted, no hidden ones) in
    folders, except under ``skip`` (imgwarm's own output); a file reached twice is taken once."""
    skipped = {p.resolve() for p in skip}
    found: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and (Path(folder) / d).resolve() not in skipped)
                found.extend(
                    Path(folder) / f for f in sorted(files)
                    if not f.startswith(".") and Path(f).suffix.lower() in IMAGE_SUFFIXES
                )
        else:
            found.append(path)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _one(path: Path, settings: Settings, stores: Stores, credits: Credits) -> SourceResult:
    try:
        if not path.exists():
            raise UnreadableSource(str(path), "no such file or folder")
        outcome = optimize_file(path, settings=settings, stores=stores, credits=credits)
    except ImgwarmError as error:
        return SourceResult(str(path), error=str(error))
    except Exception as error:  # a bug must cost one source, not the batch
        return SourceResult(str(path), error=f"{path}: internal error: {error!r}")
    return SourceResult(str(path), manifest=outcome.manifest, reused=outcome.reused)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def batch_workers(settings: Settings, sources: int) -> int:
    """Sources processed at once: the setting (or the cores), but no more than there are."""
    return min(settings.effective_workers(), max(1, sources))


def run_batch(
    paths: list[Path], settings: Settings, credits: Credits | None = None,
    stores: Stores | None = None,
) -> Iterator[SourceResult]:
    """Results as sources finish. Threads, not processes: libvips releases the GIL, and one
    libvips thread per worker keeps cores from being oversubscribed."""
    stores = stores or Stores.local(settings)
    credits = credits or Credits()
    workers = batch_workers(settings, len(paths))
    if workers == 1:
        for path in paths:
            yield _one(path, settings, stores, credits)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="imgwarm")
    try:
        # Largest first, so that no worker is left alone with a big photo at the end.
        futures = [pool.submit(_one, p, settings, stores, credits)
                   for p in sorted(paths, key=_size, reverse=True)]
        for future in as_completed(futures):
            yield future.result()
    finally:
        # On Ctrl-C (or a consumer that stops early) drop the sources not started yet.
        pool.shutdown(wait=True, cancel_futures=True)
