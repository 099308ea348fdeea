"""Warm: fill a cache server's tiers from the origin, in time with what changed.

One run, in order:

1. take the lock (one run at a time on these tiers), open the index;
2. check each tier's identity (a tier found empty, after a reboot, is refilled) and finish
   what a killed run left unsettled;
3. sources: what the manifest store's journal says changed since last time (everything, on
   a first run or with ``--full``): each source's variants are wanted, a source gone drops
   its references; new variants start with the prior (rank.py);
4. hotness: what is new in the access logs, each successful request to a variant weighed by
   its time; a hot list pins paths;
5. plan: NVMe wants every referenced variant (within its budget, densest first); RAM wants the
   densest thumbnails within its budget; variants nobody references leave both tiers;
6. act: evictions first, then copies (from NVMe when there, else the origin, in parallel),
   each committed in the index before and after; ENOSPC stops that tier alone;
7. ``--full`` first reconciles: files in the tiers the index does not hold go if this index
   wrote them (their identity says so), any other is left; files the index holds but that are
   missing or damaged (size, or hash against the name) are copied again.

``dry_run`` does all of it but act: the plan is reported, nothing is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from imgwarm.cache.copier import Copier, Failed, Item, Result
from imgwarm.cache.identity import identities, unchanged
from imgwarm.cache.index import Index
from imgwarm.cache.logformat import LogFormat, LogFormatError
from imgwarm.cache.logs import Hits, log_files, read_logs
from imgwarm.cache.placeable import Placeable, url_key
from imgwarm.cache.rank import Decay
from imgwarm.cache.tiers import IDENTITY, Tier, Tiers
from imgwarm.config import Settings
from imgwarm.exceptions import SettingsError, StorageError, WarmBusy
from imgwarm.manifest import Manifest, Record, Tombstone
from imgwarm.racepoints import reached
from imgwarm.roots import make_private
from imgwarm.store import Stores
from imgwarm.store.layout import hash_of_name
from imgwarm.store.references import key_digest

INDEX = "index.sqlite"  # in the cache_state folder
BATCH = 1024  # files a commit (and a syncfs of the NVMe tier)
AHEAD = 1  # batches copied ahead while the next is read (the copier always has one queued)
Progress = Callable[[str, int, int], None]


@dataclass
class TierReport:
    copied: int = 0
    copied_bytes: int = 0
    evicted: int = 0
    evicted_bytes: int = 0
    held: int = 0  # after the run
    held_bytes: int = 0
    budget: int | None = None
    repaired: int = 0  # --full: missing or damaged files copied again, strays removed
    foreign: int = 0  # --full: files in the tier this index never wrote: left where they are
    missing: int = 0  # not in the origin: not placed
    failed: int = 0  # could not be read or written (an I/O error): not placed, tried again
    errors: str | None = None  # the first such error
    stopped: str | None = None  # why placement in this tier stopped (a full disk)
    reset: bool = False  # found empty (a reboot, a new disk): filled again


@dataclass
class WarmReport:
    ram: TierReport = field(default_factory=TierReport)
    nvme: TierReport = field(default_factory=TierReport)
    sources: int = 0  # sources whose records were read
    variants_added: int = 0
    variants_dropped: int = 0
    log_files: int = 0
    log_lines: int = 0
    requests: int = 0  # successful GETs and HEADs read
    requests_to_variants: int = 0  # of those, to a variant imgwarm knows
    malformed_lines: int = 0
    unsafe_paths: int = 0  # with .., odd bytes or outside the image prefix: never followed
    damaged_records: int = 0  # manifest records that could not be read: skipped, kept as were
    ram_hit_share: float | None = None  # of the decayed requests, what RAM now answers
    dry_run: bool = False
    full: bool = False
    seconds: float = 0.0

    def to_object(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            name: value for name, value in vars(self).items() if name not in ("ram", "nvme")}
        found["ram"], found["nvme"] = vars(self.ram), vars(self.nvme)
        return found

    def line(self) -> str:
        """One line for a log or a terminal."""
        def tier(name: str, t: TierReport) -> str:
            text = (f"{name} +{t.copied} ({_mib(t.copied_bytes)}) -{t.evicted} "
                    f"({_mib(t.evicted_bytes)}), holds {t.held} ({_mib(t.held_bytes)})")
            text += f", {t.failed} failed ({t.errors})" if t.failed else ""
            text += f", {t.foreign} foreign file(s) left" if t.foreign else ""
            return text + (f" STOPPED: {t.stopped}" if t.stopped else "")
        share = "-" if self.ram_hit_share is None else f"{self.ram_hit_share:.1%}"
        return (f"{'would ' if self.dry_run else ''}warm: {tier('ram', self.ram)}; "
                f"{tier('nvme', self.nvme)}; RAM answers {share} of requests; "
                f"{self.sources} source(s) read, {self.log_lines:,} log line(s) "
                f"({self.malformed_lines:,} malformed, {self.unsafe_paths:,} unsafe paths); "
                + (f"{self.damaged_records:,} damaged record(s) skipped; "
                   if self.damaged_records else "") + f"{self.seconds:.1f} s")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def open_tiers(settings: Settings) -> Tiers:
    """This cache server's tiers, checked apart from its other folders."""
    cache = settings.cache
    others = {"cache_state": cache.cache_state}
    if settings.store.origin == "local":
        others |= {"origin_root": settings.store.origin_root,
                   "manifest_root": settings.store.manifest_root}
    return Tiers.open(cache.ram_root, cache.nvme_root, max_entries=settings.store.max_dir_entries,
                      allow_non_tmpfs=cache.ram_allow_non_tmpfs, others=others)


@contextlib.contextmanager
def lock(folder: Path) -> Any:
    """One run at a time on these tiers (warm, or gc's part in them); WarmBusy if taken."""
    make_private(folder, "the cache state (cache_state)")  # its index says what is trusted
    path = folder / "lock"
    with path.open("a+") as handle:
        try:  # flock, not lockf: it also keeps out a second run in this very process
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise WarmBusy(f"another `imgwarm warm` (pid {holder}) is running on these tiers "
                           f"(lock {path}); this one did nothing") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield handle.fileno()


def warm(settings: Settings, *, access_logs: list[str] | None = None,
         log_format: str | None = None, hot_list: Path | None = None, full: bool = False,
         dry_run: bool = False, now: float | None = None,
         progress: Progress | None = None) -> WarmReport:
    """One run (see the module's docstring). Raises WarmBusy when another run holds the
    tiers, SettingsError for a RAM tier not on tmpfs or a log format it cannot read."""
    started = time.monotonic()
    cache = settings.cache
    try:
        parser = LogFormat(log_format or cache.log_format)
    except LogFormatError as error:
        raise SettingsError(f"log_format (--log-format): {error}") from None
    with lock(cache.cache_state) as held:
        tiers = open_tiers(settings)
        index = Index(cache.cache_state / INDEX)
        run = _Run(settings, tiers, index, Stores.for_settings(settings.store),
                   now or time.time(), dry_run, progress or (lambda *_: None))
        run.lock = held
        kept = False
        try:
            run.go(parser, access_logs, hot_list, full)
            kept = not dry_run
        finally:
            if run.copier is not None:
                run.copier.close()
            index.close(keep=kept)
    run.report.seconds = time.monotonic() - started
    return run.report


class _Run:
    def __init__(self, settings: Settings, tiers: Tiers, index: Index, stores: Stores,
                 now: float, dry_run: bool, progress: Progress) -> None:
        self.settings, self.cache = settings, settings.cache
        self.tiers, self.index, self.stores = tiers, index, stores
        self.now, self.dry_run, self.progress = now, dry_run, progress
        self.report = WarmReport(dry_run=dry_run)
        self.decay = self._decay()
        self.changed = False  # anything that can change what RAM should hold
        self.touched: set[str] = set()  # tiers whose files changed in this run
        self.copier: Copier | None = None
        self.planned: set[str] = set()  # tiers ranked against their budget in this run
        self.lock: int | None = None  # the lock's descriptor: the copier's processes drop it
        # copies started while the records are read: the items, and the call that waits
        self.ahead: list[tuple[list[Item], Callable[[], list[tuple[Result, ...]]]]] = []
        self.tried: set[str] = set()  # copied ahead to NVMe in this run, whatever came of it
        self.ram_room: int | None = None  # bytes an empty RAM tier may still take ahead
        self.taken_down: set[str] = set()  # variants of sources deleted since the last run

    def go(self, parser: LogFormat, logs: list[str] | None, hot_list: Path | None,
           full: bool) -> None:
        self.report.full = full
        for tier in self.tiers:
            self._check_identity(tier)
        self._recover()
        if full:
            self._reconcile()
        self._sources(full)
        self._take_down()
        self._hotness(parser, logs if logs is not None else self.cache.access_logs)
        if hot_list is not None:
            self._pin(hot_list)
        self._drop_unreferenced()
        wanted = {"nvme": self._plan_nvme(), "ram": self._plan_ram()}
        self._copy(wanted)
        for tier in self.tiers:  # a budget met: the next run need not rank again
            budget = self._report(tier).budget
            if tier.name in self.planned and not self._report(tier).stopped:
                self.index.remember(f"{tier.name}_budget", budget)
        self._finish()

    # --- steps ----------------------------------------------------------------------------------

    def _decay(self) -> Decay:
        half_life = self.cache.half_life()
        epoch = self.index.meta("epoch")
        if epoch is None:
            epoch = self.now
        else:
            old = Decay(epoch, self.index.meta("half_life", half_life))
            if old.half_life != half_life or old.due_for_rebase(self.now):
                # scores kept at their value now, in the new terms (epoch - now: a factor
                # that goes to 0 after a long pause, never an overflow)
                self.index.rescale(float(2.0 ** max((old.epoch - self.now) / old.half_life,
                                                    -1000.0)))
                epoch = self.now
        self.index.remember("epoch", epoch)
        self.index.remember("half_life", half_life)
        return Decay(epoch, half_life)

    def _check_identity(self, tier: Tier) -> None:
        found, known = tier.identity(), self.index.meta(f"tier:{tier.name}")
        if found is not None and found == known:
            return
        self.index.forget_tier(tier.name)  # empty (a reboot) or not the one we filled
        self._report(tier).reset = known is not None
        self.changed = True
        self.touched.add(tier.name)
        if not self.dry_run:
            self.index.remember(f"tier:{tier.name}", tier.claim())

    def _recover(self) -> None:
        """Settle what a killed run left: placements checked, evictions done."""
        for tier in self.tiers:
            for path, size, state in self.index.unsettled(tier.name):
                self.touched.add(tier.name)
                self.changed = True  # what a tier holds moved: plan again
                there = _whole(tier, path, size)  # written by that run? its hash says
                if state == "evicting" or not there:
                    if not self.dry_run:
                        tier.delete(path)
                    self.index.mark(tier.name, [path], None)
                else:  # whole: the copy finished, only its record did not
                    self.index.mark(tier.name, [path], "placed")
                    self.index.note_written(tier.name, identities(tier, [path]))
        self._commit()

    def _reconcile(self) -> None:
        """--full: the tiers as they are, against the index. A file the index does not hold
        goes only when this index recorded writing that very file there (a copy it lost
        track of); any other (a dot file, another program's, a second state folder's copy
        on a shared root) is left and counted as foreign (DESIGN.md, I3)."""
        for tier in self.tiers:
            held = self.index.held(tier.name)
            report = self._report(tier)
            listed = [str(key) for key in tier.files() if str(key) != IDENTITY]
            reached("warm.listed")
            strays = [name for name in listed if name not in held]
            ours = self._ours(tier, strays)
            for name in strays:
                if name not in ours:
                    report.foreign += 1
                    continue
                report.repaired += 1
                if not self.dry_run:
                    tier.delete(name)
            for name in (n for n in listed if n in held):
                if not _whole(tier, name, held.pop(name)):
                    report.repaired += 1
                    self.index.mark(tier.name, [name], None)
                    if not self.dry_run:
                        tier.delete(name)
            report.repaired += len(held)  # in the index, not in the tier: placed again
            self.index.mark(tier.name, held, None)
            self.changed = True
            self.touched.add(tier.name)
        self._commit()

    def _ours(self, tier: Tier, paths: Iterable[str]) -> set[str]:
        """Of ``paths`` in a tier, those of a variant's shape that this index recorded
        writing there, still the very files it wrote: the only ones it may remove unasked."""
        return self._still_written(tier, (p for p in paths if self.stores.layout.holds(p)))

    def _sources(self, full: bool) -> None:
        """The index set from what the manifest store says changed since the last run (all of
        it on a first run, with --full, or when the journal cannot say)."""
        journal = self.stores.manifests.changes
        cursor = self.index.meta("changes")
        if full or journal is None or cursor is None or not journal.readable(cursor):
            fresh = journal.now() if journal is not None else ""
            self._listed(self.stores.manifests.everything())
        else:
            batch = journal.since(cursor)
            fresh = batch.cursor
            times = {key: t for t, key in batch.entries}  # the latest change of each key
            with ThreadPoolExecutor(max_workers=16) as pool:
                found = list(pool.map(self.stores.manifests.record, times))
            # a record that cannot be read is not a source gone: what it referenced stays
            damaged = {p.stem for p in self.stores.manifests.damaged}
            self.report.damaged_records = len(damaged)
            read = [(key, record, times[key]) for key, record in zip(times, found, strict=True)
                    if key_digest(key) not in damaged]
            if read:  # the percentile reads every scored row: only when something is new
                prior_now = self.index.prior(self.decay(self.now))
                self._set_sources(read, prior_now)
        if journal is not None:
            self.index.remember("changes", fresh)
        self._commit()

    def _listed(self, records: Iterator[Record]) -> None:
        """Every record (a first run, --full): the index set from them as they are read, and
        where NVMe takes every variant (no budget), their files copied there meanwhile."""
        prior_now = self.index.prior(self.decay(self.now))
        known = {k for (k,) in self.index.db.execute("SELECT DISTINCT key FROM refs")}
        ram = self.tiers.ram
        if not self.dry_run and self.index.totals(ram.name, 1)[0] == 0:
            # An empty RAM tier takes thumbnails in the same pass, up to its budget: read once,
            # written twice. The ranking after the listing corrects it (evicting what it does
            # not choose); where the budget holds every thumbnail it has nothing to correct.
            self.ram_room = self._budget(ram, 0)
        if self._copying_ahead():
            self._copier()  # forked before the listing starts its reading threads
        read: list[tuple[str, Record | None, float]] = []
        ahead: list[tuple[str, int]] = []  # (path, width)
        for record in records:
            key = Index.stored(record.key)
            known.discard(key)
            read.append((key, record, self.now))
            if isinstance(record, Manifest):
                ahead.extend((v.path, v.width) for v in record.variants)
            if len(ahead) >= BATCH:
                self._set_sources(read, prior_now)
                self._copy_ahead(ahead)
                read, ahead = [], []
        self._set_sources(read, prior_now)
        self._copy_ahead(ahead)
        # gone, but for a damaged record's source: what it referenced stays until it is read
        damaged = {p.stem for p in self.stores.manifests.damaged}
        self.report.damaged_records = len(damaged)
        self._set_sources([(key, None, self.now) for key in known
                           if key_digest(key) not in damaged], prior_now)
        self._settle_ahead()

    def _set_sources(self, found: list[tuple[str, Record | None, float]],
                     prior_now: float) -> None:
        """The index set from records (None: the source is gone), each read at a time."""
        now = self.decay(self.now)
        added, dropped = self.index.set_sources(
            ((key, record.variants if isinstance(record, Manifest) else [],
              prior_now * self.decay(min(when, self.now)) / now)
             for key, record, when in found), self.now)
        self.taken_down.update(path for _, record, _ in found if isinstance(record, Tombstone)
                               for path in record.variants)
        self.report.variants_added += added
        self.report.variants_dropped += dropped
        self.report.sources += len(found)
        self.changed = self.changed or bool(added or dropped)

    def _copy_ahead(self, entries: list[tuple[str, int]]) -> None:
        """Start copying to NVMe the variants of records just read, when NVMe is to take
        every variant (and thumbnails to an empty RAM tier, while it has room): the copies
        run while the rest of the records are read."""
        nvme, ram = self.tiers.nvme, self.tiers.ram
        if not entries or not self._copying_ahead():
            return
        widths = dict(entries)
        placed = self.index.sizes(widths, placed_in=nvme.name)
        page = ram.block_size() if self.ram_room is not None else 1
        items: list[Item] = []
        for path, size in self.index.sizes(widths).items():
            targets: tuple[str, ...] = () if path in placed else (nvme.name,)
            pages = -(-max(size, 1) // page) * page
            if self.ram_room is not None and pages <= self.ram_room and \
                    widths[path] <= self.cache.ram_max_width and not self.report.ram.stopped:
                self.ram_room -= pages
                targets += (ram.name,)
            if targets:
                items.append((path, size, targets, False))
        if not items:
            return
        self._placing(items)
        self.ahead.append((items, self._copier().start(items)))
        self.tried.update(p for p, _, to, _ in items if nvme.name in to)
        self._settle_ahead(keep=AHEAD)

    def _copying_ahead(self) -> bool:
        return not self.dry_run and self.cache.nvme_size() is None and \
            not self.report.nvme.stopped

    def _settle_ahead(self, keep: int = 0) -> None:
        """Wait for the copies started ahead but the last ``keep`` batches, and record them."""
        if len(self.ahead) <= keep:
            return
        done = [(items, wait()) for items, wait in self.ahead[:len(self.ahead) - keep]]
        del self.ahead[:len(done)]
        self._placed([i for items, _ in done for i in items],
                     [r for _, results in done for r in results])

    def _hotness(self, parser: LogFormat, patterns: list[str]) -> None:
        positions: dict[str, int] = self.index.meta("logs", {})
        index = self.index
        placeable = Placeable(self.cache.image_prefix, self.stores.layout,
                              str(self.cache.cache_state / INDEX),
                              lambda keys: index.sizes(keys).keys())
        hits: Hits = read_logs(log_files(patterns), parser, positions, self.decay, self.now,
                               placeable)
        # by variant key, checked as read: unsafe paths counted and dropped there
        weights = {k.decode("utf-8", "surrogateescape"): w for k, w in hits.by_path.items()}
        counts = {k.decode("utf-8", "surrogateescape"): c
                  for k, c in hits.count_by_path.items()}
        self.report.unsafe_paths += hits.unsafe
        known = set(self.index.sizes(weights))
        self.index.add_scores({k: w for k, w in weights.items() if k in known})
        self.report.log_files, self.report.log_lines = hits.files, hits.lines
        self.report.requests, self.report.malformed_lines = hits.counted, hits.malformed
        self.report.requests_to_variants = sum(counts[k] for k in known)
        self.changed = self.changed or bool(known)
        self.index.remember("logs", positions)
        self._commit()

    def _pin(self, hot_list: Path) -> None:
        try:
            lines = hot_list.read_bytes().splitlines()
        except OSError as error:
            raise StorageError(f"cannot read the hot list {hot_list}: {error.strerror}") \
                from None
        keys = {url_key(line.strip(), self.cache.image_prefix) for line in lines if line.strip()}
        self.report.unsafe_paths += sum(1 for k in keys if k is None)
        known = set(self.index.sizes(k for k in keys if k is not None))
        self.changed = self.index.set_pinned(known) or self.changed

    def _take_down(self) -> None:
        """A deleted source's variants leave both tiers now, whatever ``drop_gone`` says,
        unless another source names them; a file the index does not know is removed too."""
        if not self.taken_down:
            return
        known = self.index.states(self.taken_down)
        gone = sorted(p for p in self.taken_down if known.get(p, (0,))[0] == 0
                      and self.stores.layout.holds(p))  # (a hand-made tombstone's: no path)
        for tier in self.tiers:
            column = 2 if tier.name == "ram" else 3
            held = {p: known[p][1] for p in gone if p in known and known[p][column]}
            self._evict(tier, held)
            unheld = [p for p in gone if p not in held]  # not in the index: ours, lost?
            for path in self._ours(tier, unheld):
                size = tier.size_of(path)
                if size is not None:
                    if not self.dry_run:
                        tier.delete(path)
                    self._report(tier).evicted += 1
                    self._report(tier).evicted_bytes += size
        if not self.dry_run:
            self.index.forget_unreferenced()
        self._commit()

    def _drop_unreferenced(self) -> None:
        if not self.cache.drop_gone:
            return
        gone = self.index.unreferenced()
        sizes = self.index.sizes(p for p, _, _ in gone)
        for tier in self.tiers:
            held = [p for p, ram, nvme in gone if (ram if tier.name == "ram" else nvme)]
            self._evict(tier, {p: sizes.get(p, 0) for p in held})
        if not self.dry_run:
            self.index.forget_unreferenced()
        self._commit()

    def _budget(self, tier: Tier, held: int) -> int | None:
        size = self.cache.ram_size() if tier.name == "ram" else self.cache.nvme_size()
        if size is None:
            return None
        total, free = tier.space()
        return min(size.of(total), free + held)  # never more than the file system has

    def _plan_nvme(self) -> dict[str, int]:
        """What to copy to NVMe: every variant not there yet; with a budget, the densest
        within it, whatever their width (the rest evicted first)."""
        tier, report = self.tiers.nvme, self.report.nvme
        if self.cache.nvme_size() is None:  # (what was copied ahead and failed: not again)
            return {p: s for p, s in self.index.wanted_on_nvme() if p not in self.tried}
        budget = self._budget(tier, self.index.totals(tier.name, 1)[1])
        report.budget = budget
        if budget is None or (not self.changed and self.index.meta("nvme_budget") == budget):
            return {}  # nothing that ranks or bounds the NVMe tier changed
        self.planned.add(tier.name)
        held = self.index.held(tier.name)
        chosen = self.index.choose(budget, max_width=1 << 30, page=1)
        self._evict(tier, {p: s for p, s in held.items() if p not in chosen})
        return {p: s for p, s in chosen.items() if p not in held}

    def _plan_ram(self) -> dict[str, int]:
        """What to copy to RAM: the densest thumbnails within the budget (the rest evicted
        first). A tmpfs gives each file whole pages, so sizes are counted in pages: a budget
        near the tmpfs's size is never overrun."""
        tier, report = self.tiers.ram, self.report.ram
        page = tier.block_size()
        budget = self._budget(tier, self.index.totals(tier.name, page)[2])
        report.budget = budget
        if budget is None or (not self.changed and self.index.meta("ram_budget") == budget):
            return {}  # nothing that ranks or bounds the RAM tier changed: it stays as it is
        self.planned.add(tier.name)
        held = self.index.held(tier.name)
        chosen = self.index.choose(budget, max_width=self.cache.ram_max_width, page=page)
        self._evict(tier, {p: s for p, s in held.items() if p not in chosen})
        return {p: s for p, s in chosen.items() if p not in held}

    def _finish(self) -> None:
        """What each tier holds and RAM's hit share: counted again only when something changed
        (a run with nothing new costs nothing at any size), else as the last run counted."""
        for tier in self.tiers:
            held = self.index.meta(f"held:{tier.name}")
            if held is None or tier.name in self.touched:
                held = self.index.totals(tier.name, 1)[:2]
                self.index.remember(f"held:{tier.name}", held)
            report = self._report(tier)
            report.held, report.held_bytes = held
        share = self.index.meta("hit_share")
        if share is None or self.changed or self.touched:
            share = self.index.hit_share()
            self.index.remember("hit_share", share)
        in_ram, total = share
        self.report.ram_hit_share = in_ram / total if total > 0 else None
        self._commit()

    # --- acting -------------------------------------------------------------------------------

    def _report(self, tier: Tier) -> TierReport:
        return self.report.ram if tier.name == "ram" else self.report.nvme

    def _commit(self) -> None:
        if not self.dry_run:
            self.index.commit()

    def _evict(self, tier: Tier, paths: dict[str, int]) -> None:
        report = self._report(tier)
        if paths:
            self.touched.add(tier.name)
        report.evicted += len(paths)
        report.evicted_bytes += sum(paths.values())
        evict(self.index, tier, paths, dry_run=self.dry_run)

    def _copy(self, wanted: dict[str, dict[str, int]]) -> None:
        """Copy what each tier wants, in batches: a file both tiers want is read once and
        written to both; one only RAM wants is read from NVMe when it is there (faster than
        the origin). Each batch is marked ``placing`` in the index before and settled after;
        a tier found full stops, the other goes on."""
        paths = sorted(wanted["nvme"].keys() | wanted["ram"].keys())
        for start in range(0, len(paths), BATCH):
            self.progress("tiers", start, len(paths))
            items: list[Item] = []
            part = paths[start:start + BATCH]
            on_nvme = self._still_written(self.tiers.nvme, self.index.sizes(
                (p for p in part if p not in wanted["nvme"]), placed_in="nvme"))
            for path in part:
                targets = tuple(t.name for t in self.tiers
                                if path in wanted[t.name] and not self._report(t).stopped)
                size = wanted["nvme"].get(path) or wanted["ram"][path]
                if targets:
                    items.append((path, size, targets, "nvme" not in targets and path in on_nvme))
            if not items:
                continue
            if self.dry_run:
                for tier in self.tiers:
                    mine = [(p, s) for p, s, to, _ in items if tier.name in to]
                    self._report(tier).copied += len(mine)
                    self._report(tier).copied_bytes += sum(s for _, s in mine)
                continue
            self._placing(items)
            self._placed(items, self._copier().place(items))
        self.progress("tiers", len(paths), len(paths))

    def _placing(self, items: list[Item]) -> None:
        """Say in the index, before copying, what each tier is being given."""
        for tier in self.tiers:
            self.index.mark(tier.name, [p for p, _, to, _ in items if tier.name in to],
                            "placing")
            self.touched.add(tier.name)
        self._commit()

    def _placed(self, items: list[Item], results: list[tuple[Result, ...]]) -> None:
        """Record what the copies did, once the NVMe tier's are on the disk."""
        if any(self.tiers.nvme.name in targets for _, _, targets, _ in items):
            self.tiers.nvme.sync()  # on the disk before the index says they are placed
        for tier in self.tiers:
            self._settle(tier, items, results)
        self._commit()

    def _settle(self, tier: Tier, items: list[Item], results: list[tuple[Result, ...]]) -> None:
        """Record in the index and the report what a batch did in one tier."""
        report = self._report(tier)
        placed: dict[str, int] = {}
        failed: list[str] = []
        for (path, size, targets, _), outcome in zip(items, results, strict=True):
            if tier.name not in targets:
                continue
            result = outcome[targets.index(tier.name)]
            if result is True:
                placed[path] = size
                continue
            failed.append(path)
            if result is False:
                report.missing += 1
            elif isinstance(result, Failed):
                report.failed += 1
                report.errors = report.errors or result.message
            elif report.stopped is None:
                report.stopped = result.message
        self.index.mark(tier.name, placed, "placed")
        self.index.note_written(tier.name, identities(tier, placed))
        self.index.mark(tier.name, failed, None)
        report.copied += len(placed)
        report.copied_bytes += sum(placed.values())

    def _still_written(self, tier: Tier, paths: Iterable[str]) -> set[str]:
        """Of files the index says a tier holds, those still the very files warm wrote there
        (a copy is read from them): any other is copied from the origin, and replaced."""
        return unchanged(tier, self.index.written(tier.name, paths))

    def _copier(self) -> Copier:
        if self.copier is None:  # started on the first copy: a run with none forks nothing
            self.copier = Copier(list(self.tiers), self.stores.origin,
                                 local=self.settings.store.origin == "local",
                                 drop=() if self.lock is None else (self.lock,))
        return self.copier


def evict(index: Index, tier: Tier, paths: dict[str, int], *, dry_run: bool) -> None:
    """Remove files from a tier, each batch marked ``evicting`` in the index before and
    settled after (a run killed between is finished by the next: ``_recover``)."""
    items = sorted(paths)
    for start in range(0, len(items), BATCH):
        part = items[start:start + BATCH]
        index.mark(tier.name, part, "evicting")
        if not dry_run:
            index.commit()
            for path in part:
                tier.delete(path)
        index.mark(tier.name, part, None)
        if not dry_run:
            index.commit()


def _whole(tier: Tier, name: str, size: int) -> bool:
    """The file is the size the index says and its bytes hash to its name."""
    if tier.size_of(name) != size:
        return False
    data = tier.read(name)
    digest = hash_of_name(PurePosixPath(name).name)
    return data is not None and hashlib.sha256(data).hexdigest().startswith(digest)
