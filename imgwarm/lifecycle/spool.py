"""Spool: what a store-wide pass read from every record, kept on local disk in one file per
first-level folder of the variants, so that each folder is then compared alone in bounded
memory (manifests are sharded by their key, variants by their hash: one read of the records
cannot be split by variant folder, its pairs can)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from imgwarm.store.layout import Layout
from imgwarm.store.shard import Shard

OTHER = ""  # the folder of named paths outside the shard folders (written by hand)
NAMED, GONE = "m", "t"  # a manifest names (path, digest); a tombstone's path


class Spool:
    """Per-folder files of ``(kind, path, digest, key)`` lines, for this slice's folders only
    (the folder of paths outside them goes to slice 1). Removed on close."""

    def __init__(self, layout: Layout, shard: Shard) -> None:
        self.tops = shard.tops(layout)
        self._mine = set(self.tops)
        self._every = set(layout.tops())
        self._other = shard.index == 1
        self._root = Path(tempfile.mkdtemp(prefix="imgwarm-spool-"))
        self._files: dict[str, TextIO] = {}

    def folders(self) -> list[str]:
        """This slice's folders, in order, and the folder of other paths when it is its."""
        return [*self.tops, OTHER] if self._other else list(self.tops)

    def top_of(self, path: str) -> str | None:
        """The folder a variant path is compared in; None when it is another slice's."""
        top = path.split("/", 1)[0] if "/" in path else OTHER
        if top not in self._every:
            top = OTHER
        if top == OTHER:
            return OTHER if self._other else None
        return top if top in self._mine else None

    def add(self, kind: str, path: str, digest: str = "", key: str = "") -> None:
        top = self.top_of(path)
        if top is None:
            return
        out = self._files.get(top)
        if out is None:
            out = self._files[top] = open(self._file(top), "a", encoding="utf-8")  # noqa: SIM115
        # a path is safe_relative (no tab, no newline); a key may hold anything: JSON
        out.write(f"{kind}\t{path}\t{digest}\t{json.dumps(key)}\n")

    def read(self, top: str) -> Iterator[tuple[str, str, str, str]]:
        """The lines of one folder, once (its file is removed after)."""
        out = self._files.pop(top, None)
        if out is None:
            return
        out.close()
        with open(self._file(top), encoding="utf-8") as lines:
            for line in lines:
                kind, path, digest, key = line.rstrip("\n").split("\t", 3)
                yield kind, path, digest, json.loads(key)
        self._file(top).unlink()

    def _file(self, top: str) -> Path:
        return self._root / (top or "_other")

    def close(self) -> None:
        for out in self._files.values():
            out.close()
        self._files.clear()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
