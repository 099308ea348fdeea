"""References: which sources name each variant, and since when a variant is named by none,
kept beside the manifests so that ``delete`` and ``gc`` never have to read every manifest.

    refs/<variant path>/<key digest>   a source (by its manifest's digest) names the variant
    dropped/<variant path>             a manifest stopped naming it; written at that time
    references.json                    every manifest's markers are there (see ``build``)

Markers are made or removed whole, never edited, so writers on many machines cannot lose one
another's. A source claims its markers before it writes its variants and its manifest, and
releases them only after its next manifest (or its tombstone) is written: a manifest that
names a variant always has its marker. ``reclaim`` closes the one gap left, a source that
claims a variant at the moment it is removed.

Two runs of one key (an event and the reconcile, a job handed out again) making the same bytes
claim the same markers. A failed run releases only the markers its own claim created, and a
run that found some already there makes them again once its manifest is written
(``pipeline/optimize.py``): one run's failure never takes the other's claims.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

from imgwarm.exceptions import ObjectTooLarge
from imgwarm.racepoints import reached
from imgwarm.store.base import Store
from imgwarm.store.layout import Layout
from imgwarm.store.listing import Listings, empty, sharded, write_time
from imgwarm.store.local import LocalStore

REFS, DROPPED, BUILT = "refs", "dropped", "references.json"
S3_THREADS = 8  # marker writes in flight for one source


def key_digest(key: str) -> str:
    """A source key's digest: its manifest's name, and its marker's (surrogateescape: a file
    name that is not UTF-8 is still a key)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class References:
    def __init__(self, store: Store, layout: Layout) -> None:
        self.store = store
        self.layout = layout
        self.local = isinstance(store, LocalStore)
        self._built = False

    def _each(self, call: Callable[[str], object], items: Iterable[str]) -> None:
        """``call`` on every variant path: in threads where each is a round trip (S3). A
        path without a variant's shape (a manifest written by hand) is none of gc's: skipped."""
        listed = [path for path in items if self.layout.holds(path)]
        if self.local or len(listed) < 2:
            for item in listed:
                call(item)
            return
        with ThreadPoolExecutor(min(S3_THREADS, len(listed))) as pool:
            list(pool.map(call, listed))

    # --- who names a variant ------------------------------------------------------------------

    def claim(self, key: str, paths: Iterable[str], created: set[str] | None = None) -> None:
        """Say that ``key``'s source names these variants (before they are written). Each
        path whose marker this call created is added to ``created`` as it is, so that a claim
        cut short still tells what it made; the others were there already (another run of
        the same key, in flight or dead), and are not this run's to release."""
        digest = key_digest(key)

        def one(path: str) -> None:
            if self.claim_digest(digest, path) and created is not None:
                created.add(path)  # (set.add: safe from the threads)

        self._each(one, paths)

    def release(self, key: str, paths: Iterable[str]) -> None:
        """Say that ``key``'s source no longer names these (after its next record is written)."""
        digest = key_digest(key)
        self._each(lambda p: self.release_digest(digest, p), paths)

    def claim_digest(self, digest: str, path: str) -> bool:
        """True when this call created the marker (False: it was there)."""
        return self.store.write(f"{REFS}/{path}/{digest}", b"")

    def release_digest(self, digest: str, path: str) -> None:
        self._unmark(f"{REFS}/{path}/{digest}")

    def _unmark(self, marker: str) -> None:
        self.store.delete(marker)
        if isinstance(self.store, LocalStore):  # an empty folder would still count an entry
            self.store.prune(str(PurePosixPath(marker).parent))

    def holders(self, path: str) -> set[str]:
        """The digests of the sources that name the variant at ``path``."""
        return {found.name for found in self.store.files(f"{REFS}/{path}")}

    def claimed(self, *, times: bool = True, tops: Iterable[str] | None = None,
                listings: Listings | None = None) -> Iterator[tuple[str, str, float]]:
        """Every marker (of the variants in the first-level folders ``tops`` when given):
        (variant path, source digest, when it was written: 0.0 unless ``times`` where the
        listing does not give it, see ``written``). ``listings``: a pass's (listing.py)."""
        for marker, when in sharded(self.store, self.layout, REFS, times=times, tops=tops,
                                    listings=listings):
            yield str(PurePosixPath(*marker.parts[1:-1])), marker.name, when

    def by_variant(self, tops: Iterable[str] | None = None) -> dict[str, set[str]]:
        """Every marker (under ``tops`` when given) from one listing (in parallel pages):
        variant path -> digests."""
        found: dict[str, set[str]] = {}
        for path, digest, _ in self.claimed(times=False, tops=tops):
            found.setdefault(path, set()).add(digest)
        return found

    def claimed_at(self, path: str, digest: str) -> float:
        """When a marker was written (0.0: gone)."""
        return write_time(self.store, f"{REFS}/{path}/{digest}")

    # --- variants named by none ---------------------------------------------------------------

    def note_dropped(self, paths: Iterable[str], by: str = "") -> None:
        """These variants just lost a reference: gc looks at them after its grace period.
        ``by``: the digest of the source whose record dropped them (the marker's content),
        so that gc can tell a takedown's drop (no grace) from a live source's (grace)."""
        self._each(lambda p: self.store.write(f"{DROPPED}/{p}", by.encode(), replace=True),
                   paths)

    def dropped_by(self, path: str) -> str | None:
        """The digest of the source that last dropped ``path`` (its marker's content): ""
        when not said (gc noticed it, or imgwarm 0.2.0 wrote it), None when no marker."""
        try:
            raw = self.store.read(f"{DROPPED}/{path}", limit=256)
        except ObjectTooLarge:  # not one imgwarm wrote: says no one
            return ""
        if raw is None:
            return None
        said = raw.decode("ascii", "replace").strip()
        return said if re.fullmatch(r"[0-9a-f]{32}", said) else ""  # else: not ours to trust

    def dropped(self, tops: Iterable[str] | None = None,
                listings: Listings | None = None) -> Iterator[tuple[str, float]]:
        """Variants that lost a reference, and when they last did. A marker whose path has
        no variant's shape (made by hand: imgwarm writes none) is passed over: gc would
        otherwise remove whatever file it names, an original included."""
        for marker, when in sharded(self.store, self.layout, DROPPED, tops=tops,
                                    listings=listings):
            path = str(PurePosixPath(*marker.parts[1:]))
            if self.layout.holds(path):
                yield path, when

    def forget_dropped(self, path: str) -> None:
        self._unmark(f"{DROPPED}/{path}")

    # --- markers for manifests made before them -------------------------------------------------

    def built(self) -> bool:
        """Whether every manifest's markers are there (a store made by an imgwarm before
        references has manifests without them: ``gc`` builds them once)."""
        if not self._built:
            self._built = self.store.exists(BUILT)
        return self._built

    def start(self) -> None:
        """Before the store's format record is created (``FormatGate.before_create``, on an
        unguarded store): a manifest store that holds nothing yet has every manifest's
        markers (none), so it starts built; one that holds anything (a 0.2.0 store, which
        has no format record) may have manifests from before markers, and waits for gc's
        full pass. Race-free: no writer of this format writes before the record exists, so
        an empty listing here was empty before any of them; the marker goes first, so a
        crash between the two leaves an empty store built, never a used one unbuilt."""
        if empty(self.store):
            reached("references.empty")
            self.mark_built()

    def mark_built(self) -> None:
        body = json.dumps({"built": time.time(), "by": os.getpid()}).encode()
        self.store.write(BUILT, body, replace=True)
        self._built = True

