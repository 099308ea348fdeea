"""Batch: many sources at once, in parallel, each succeeding or failing on its own."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from imgwarm.config import Settings
from imgwarm.exceptions import FormatTooNew, ImgwarmError, SourceError, UnreadableSource
from imgwarm.formats import SOURCE_SUFFIXES
from imgwarm.manifest import Credits, SourceResult
from imgwarm.pipeline.isolate import IN_PROCESS, Isolated, PixelWork
from imgwarm.pipeline.optimize import Outcome, optimize_file, optimize_key
from imgwarm.store import Stores
from imgwarm.store.format import WRITE


@dataclass(frozen=True)
class Skipped:
    """An entry of a folder that cannot be taken: it gets its line, the rest go on."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Scanned:
    """A file found in a folder: read only if, once open, it is still inside that folder (a
    link can be put in its place after the folder was read)."""

    path: Path
    within: str  # the folder scanned, resolved


Found = Path | Scanned | Skipped


def collect_sources(arguments: Iterable[str], skip: Iterable[Path] = ()) -> list[Found]:
    """Files as named, and JPEG and PNG files found recursively (sorted, no hidden ones) in
    folders, except under ``skip`` (imgwarm's own output); a file reached twice is taken once.

    In a folder, a symlink is followed only when it stays inside that folder (an upload area
    must not publish what a planted link points at); folders that cannot be listed and links
    that lead out or in a loop are Skipped, each with its reason."""
    skipped = {os.path.realpath(p) for p in skip}
    found: list[Found] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            found.extend(_scan(path, skipped))
        else:
            found.append(path)
    unique: dict[str, Found] = {}
    for item in found:  # a refused entry never stands for the file it points at
        where = (f"skipped:{item.path}" if isinstance(item, Skipped)
                 else os.path.realpath(item.path if isinstance(item, Scanned) else item))
        unique.setdefault(where, item)
    return list(unique.values())


def _scan(top: Path, skipped: set[str]) -> Iterator[Scanned | Skipped]:
    root = os.path.realpath(top)
    problems: list[Skipped] = []

    def unlistable(error: OSError) -> None:
        problems.append(Skipped(Path(error.filename or top),
                                f"cannot list this folder: {error.strerror}"))

    for folder, dirs, files in os.walk(top, onerror=unlistable):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(Path(folder) / d) not in skipped)
        for name in sorted(files):
            # What a folder is searched for; a file named on the command line is taken as named.
            if name.startswith(".") or Path(name).suffix.lower() not in SOURCE_SUFFIXES:
                continue
            path = Path(folder) / name
            problem = _link_problem(path, root)
            yield Skipped(path, problem) if problem else Scanned(path, root)
        yield from problems
        problems.clear()
    yield from problems  # the top folder itself could not be listed


def _link_problem(path: Path, root: str) -> str | None:
    if not path.is_symlink():
        return None
    try:
        target = str(path.resolve(strict=True))
    except RuntimeError:
        return "symlink loop"
    except OSError as error:
        return f"broken symlink ({error.strerror})"
    if os.path.commonpath([root, target]) != root:
        return f"symlink leads outside {root}: name the file itself to take it"
    return None


def _guarded(source: str, work: Callable[[], Outcome]) -> SourceResult:
    try:
        outcome = work()
    except FormatTooNew:  # the store's, not the source's: the run stops (one line)
        raise
    except SourceError as error:  # its message names the source already
        return SourceResult(source, error=str(error))
    except ImgwarmError as error:  # storage, layout: about an output path, so say which source
        return SourceResult(source, error=f"{source}: {error}")
    except Exception as error:  # a bug must cost one source, not the batch
        return SourceResult(source, error=f"{source}: internal error: {error!r}")
    return SourceResult(source, manifest=outcome.manifest, reused=outcome.reused)


def _one(item: Found, settings: Settings, stores: Stores, credits: Credits,
         pixels: PixelWork = IN_PROCESS) -> SourceResult:
    if isinstance(item, Skipped):
        return SourceResult(str(item.path), error=f"{item.path}: {item.reason}")
    path, within = (item.path, item.within) if isinstance(item, Scanned) else (item, None)

    def work() -> Outcome:
        if not path.exists() and not path.is_symlink():
            raise UnreadableSource(str(path), "no such file or folder")
        return optimize_file(path, settings=settings, stores=stores, credits=credits,
                             within=within, pixels=pixels)

    return _guarded(str(path), work)


def one_file(item: Found, settings: Settings, stores: Stores, credits: Credits,
             pixels: PixelWork = IN_PROCESS) -> SourceResult:
    """One file, as ``run_batch`` takes it, with the caller's pixel workers (``watch``
    keeps one pool for its whole run)."""
    return _one(item, settings, stores, credits, pixels)


def one_key(key: str, settings: Settings, stores: Stores, credits: Credits,
            pixels: PixelWork = IN_PROCESS) -> SourceResult:
    """One original from the origin, by key."""
    return _guarded(key, lambda: optimize_key(key, settings=settings, stores=stores,
                                              credits=credits, pixels=pixels))


def _size(item: Found) -> int:
    try:
        return item.stat().st_size if isinstance(item, Path) else item.path.stat().st_size
    except OSError:
        return 0


def batch_workers(settings: Settings, sources: int) -> int:
    """Sources processed at once: the setting (or the cores), but no more than there are, nor
    than max_memory holds at a worker's idle cost (with a warning when it cuts the setting;
    one a core is only a default)."""
    wanted = min(settings.image.effective_workers(), max(1, sources))
    workers, cut = settings.image.workers_within_memory(wanted)
    if cut is not None and settings.image.workers:
        warnings.warn(cut, RuntimeWarning, stacklevel=2)
    return workers


Item = TypeVar("Item")


def _parallel(
    items: list[Item], work: Callable[[Item], SourceResult], workers: int
) -> Iterator[SourceResult]:
    """Results as items finish, ``workers`` at a time, in the order given."""
    if workers == 1:
        for item in items:
            yield work(item)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="imgwarm")
    try:
        futures = [pool.submit(work, item) for item in items]
        for future in as_completed(futures):
            yield future.result()
    finally:
        # On Ctrl-C (or a consumer that stops early) drop the items not started yet.
        pool.shutdown(wait=True, cancel_futures=True)


def run_batch(
    paths: list[Found], settings: Settings, credits: Credits | None = None,
    stores: Stores | None = None,
) -> Iterator[SourceResult]:
    """Results as sources finish. A thread a worker reads each source and writes its files;
    the pixel work runs in as many worker processes (``isolate.py``), so that a decoder that
    crashes fails its source alone, whatever ``workers`` is."""
    stores = stores or Stores.local(settings.store)
    stores.check(WRITE)  # before any source: a store too new is one line, not one a source
    given = credits or Credits()
    # Largest first, so that no worker is left alone with a big photo at the end.
    ordered = sorted(paths, key=_size, reverse=True)
    workers = batch_workers(settings, len(paths))
    with Isolated(workers) as pixels:
        yield from _parallel(ordered, lambda p: _one(p, settings, stores, given, pixels),
                             workers)


def run_keys(
    keys: list[str], settings: Settings, credits: Credits | None = None,
    stores: Stores | None = None,
) -> Iterator[SourceResult]:
    """``run_batch`` for originals in the origin (local folder or S3), by key."""
    stores = stores or Stores.for_settings(settings.store)
    stores.check(WRITE)
    given = credits or Credits()
    workers = batch_workers(settings, len(keys))
    with Isolated(workers) as pixels:
        yield from _parallel(keys, lambda k: one_key(k, settings, stores, given, pixels),
                             workers)
