"""The lifecycle's invariants (docs/architecture.md), checked on the real files after anything
ran: a fault, a SIGKILL, commands at the same time. Each check returns a list of violations, one
readable line each (empty: all holds), so that a failing run says what broke and where.

    I1  every manifest that can be read names only variant files that exist in the origin;
        and each such variant has its claim marker (else the next gc may take it), once the
        store's references are built (a store older than them has none until gc's first);
    I2  no file a live source named before the step was removed, unless every source that
        named it was deleted (a takedown removes at once); with the grace period running
        (the default 7 days) nothing else goes either, but a tombstone's variants;
    I3  a tier only loses files of the variant shape that warm placed: every other file found
        there before (a dot file, another program's, another state folder's copy) stays;
    I4  a source that had a manifest still has one, or a tombstone: a failed or repeated job
        never leaves it worse (a failure recorded over it would release its claims).

A snapshot is taken before the step, the check after it; both read the stores directly
(``real_stores``: never a wrapper that may fail).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from imgwarm.config import Settings
from imgwarm.config.store import StoreSettings
from imgwarm.manifest import Manifest, Record, Tombstone, parse_record
from imgwarm.store import Stores
from imgwarm.store.references import BUILT, REFS, key_digest


def real_stores(settings: Settings | StoreSettings) -> Stores:
    """The stores of the settings, built directly (``Stores.for_settings`` may be patched by
    the fault harness)."""
    store = settings.store if isinstance(settings, Settings) else settings
    return Stores.s3(store) if store.origin == "s3" else Stores.local(store)


def origin_variants(stores: Stores) -> set[str]:
    """Every file of a variant's shape in the origin (one listing)."""
    return {str(p) for p in stores.origin.files() if stores.layout.holds(str(p))}


@dataclass
class Listed:
    """The manifest store as one listing shows it: its records and its claim markers (one
    listing of the whole store, not imgwarm's own listing of each shard folder: on S3 that
    is 128 requests, and these checks run after every fault)."""

    records: dict[str, Record]
    claims: dict[str, set[str]]  # variant path -> digests of the sources claiming it


def listed(stores: Stores) -> Listed:
    store, layout = stores.manifests.store, stores.layout
    found: dict[str, Record] = {}
    claims: dict[str, set[str]] = {}
    for key in store.files():
        parts = key.parts
        if parts[0] == REFS and len(parts) == layout.levels + 3:
            claims.setdefault(str(PurePosixPath(*parts[1:-1])), set()).add(key.name)
        elif key.suffix == ".json" and len(parts) == layout.levels + 1:
            raw = store.read(key)
            record = parse_record(raw) if raw is not None else None
            if record is not None and stores.manifests.key_path(record.key) == key:
                found[record.key] = record
    return Listed(found, claims)


def records(stores: Stores) -> dict[str, Record]:
    """Every record that can be read, by key."""
    return listed(stores).records


def live_names(found: dict[str, Record]) -> dict[str, set[str]]:
    """Variant path -> keys of the manifests that name it."""
    named: dict[str, set[str]] = {}
    for record in found.values():
        if isinstance(record, Manifest):
            for variant in record.variants:
                named.setdefault(variant.path, set()).add(record.key)
    return named


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tier_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@dataclass
class Snapshot:
    """What a step must not lose."""

    named: dict[str, set[str]]  # variant path -> keys of live manifests naming it
    variants: set[str]  # every variant-shaped file in the origin
    foreign: dict[Path, str | None] = field(default_factory=dict)  # tier file -> its hash
    made: set[str] = field(default_factory=set)  # keys with a manifest


def snapshot(stores: Stores, tier_roots: Iterable[Path] = (),
             planted: Iterable[Path] = ()) -> Snapshot:
    """Before a step. ``planted``: files put in a tier that have a variant's shape but that
    warm never placed (their bytes must stay too); every file of another shape found under
    ``tier_roots`` is foreign by its shape alone."""
    foreign: dict[Path, str | None] = {p: _digest(p) for p in planted}
    for root in tier_roots:
        for path in tier_files(root):
            relative = path.relative_to(root).as_posix()
            if not stores.layout.holds(relative):
                foreign.setdefault(path, None)
    found = records(stores)
    return Snapshot(live_names(found), origin_variants(stores), foreign,
                    {k for k, r in found.items() if isinstance(r, Manifest)})


def check(stores: Stores, before: Snapshot | None = None, *, grace_passed: bool = False,
          ) -> list[str]:
    """I1 (and the claims), I2 against ``before``, I3 for the foreign files it saw, I4.
    ``grace_passed``: the step may remove what no manifest names any more (gc with grace 0);
    else only a tombstone's variants may go."""
    seen = listed(stores)
    found, claims = seen.records, seen.claims
    named = live_names(found)
    files = origin_variants(stores)
    problems: list[str] = []
    built = stores.manifests.store.exists(BUILT)  # else no claim is promised (gc builds them)
    for path, keys in sorted(named.items()):
        for key in sorted(keys):
            if path not in files:
                problems.append(f"I1: the manifest of {key} names {path}, not in the origin")
            if built and stores.layout.holds(path) and \
                    key_digest(key) not in claims.get(path, set()):
                problems.append(f"I1: the manifest of {key} names {path} without its claim "
                                f"(refs/{path}/{key_digest(key)})")
    if before is None:
        return problems
    taken_down = {p for r in found.values() if isinstance(r, Tombstone) for p in r.variants}
    for path in sorted((before.variants | set(before.named)) - files):
        namers = before.named.get(path, set())
        if path in named:
            problems.append(f"I2: {path} was removed, and {sorted(named[path])} name(s) it")
            continue
        if grace_passed:
            continue
        alive = sorted(k for k in namers if not isinstance(found.get(k), Tombstone))
        if alive:
            problems.append(f"I2: {path} was removed within the grace period; "
                            f"{alive} named it before and were not deleted")
        elif path not in taken_down:
            problems.append(f"I2: {path}, named by no live source and no tombstone, was "
                            "removed within the grace period")
    for key in sorted(before.made):
        if not isinstance(found.get(key), Manifest | Tombstone):
            problems.append(f"I4: {key} had a manifest; now {found.get(key)!r}")
    for file, digest in sorted(before.foreign.items()):
        if not file.is_file():
            problems.append(f"I3: {file} (not placed by warm) was removed from its tier")
        elif digest is not None and _digest(file) != digest:
            problems.append(f"I3: {file} (not placed by warm) was overwritten")
    return problems


def tiers_match_index(settings: Settings) -> list[str]:
    """After a warm run that completed: every file warm's index says a tier holds is there,
    whole in size, and nothing is left half done (``placing``/``evicting``)."""
    from imgwarm.cache.lock import INDEX

    path = settings.cache.cache_state / INDEX
    if not path.exists():
        return [f"warm: no index at {path}"]
    roots = {"ram": settings.cache.ram_root, "nvme": settings.cache.nvme_root}
    problems = []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT path, bytes, ram, nvme FROM variants").fetchall()
    finally:
        db.close()
    for variant, size, *states in rows:
        for tier, state in zip(("ram", "nvme"), states, strict=True):
            file = roots[tier] / variant
            if state in ("placing", "evicting"):
                problems.append(f"warm: {tier} {variant} left {state}")
            elif state == "placed" and (not file.is_file() or file.stat().st_size != size):
                problems.append(f"warm: the index says {tier} holds {variant} ({size} bytes); "
                                f"it {'has another size' if file.is_file() else 'is missing'}")
    return problems


def in_tier(settings: Settings, tier: str) -> set[str]:
    """The variant-shaped files of a tier (relative paths)."""
    from imgwarm.store.layout import Layout

    root = settings.cache.ram_root if tier == "ram" else settings.cache.nvme_root
    layout = Layout(settings.store.max_dir_entries, settings.store.shard_levels)
    found = (p.relative_to(root).as_posix() for p in tier_files(root))
    return {p for p in found if layout.holds(p)}


def verdict(problems: list[str], name: str) -> str:
    """The assertion message for ``problems``: the first 30, and where all of them were kept
    (a file under /tmp, so that a failure in a long run can be read whole afterwards)."""
    import re
    import tempfile

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
    kept = Path(tempfile.gettempdir()) / f"imgwarm-invariants-{safe}.txt"
    kept.write_text("\n".join(problems) + "\n")
    return "\n".join(problems[:30]) + f"\n({len(problems)} in all; every one in {kept})"
