"""Shard: one slice ``I/N`` of a store-wide pass (``fsck``, ``gc --full``), as a set of the
layout's first-level folders, so that N machines check or collect one store between them.

A slice is a contiguous run of the first-level folder names (``layout.tops()``, 128 with
the defaults): slice I of N takes ``tops[(I-1)*T//N : I*T//N]``. Every folder is in exactly
one slice; with N above T some slices hold none (and find nothing). Variants, their claim
markers (``refs/<variant path>/...``) and their drop markers (``dropped/<variant path>``)
all sit under the folder of the variant's hash, so a slice sees everything of its variants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from imgwarm.store.layout import Layout

_FORM = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*")
MAX_COUNT = 1_000_000  # more slices than anyone runs: a typo, not a plan


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, 1..count
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_COUNT:
            raise ValueError(f"shard {self.index}/{self.count}: the count must be 1 to "
                             f"{MAX_COUNT:,}")
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: the index must be 1 to "
                             f"{self.count} (slices are numbered from 1)")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"``, e.g. ``"3/8"``; ValueError with one line saying what is wrong."""
        found = _FORM.fullmatch(text)
        if found is None:
            raise ValueError(f"shard {text!r}: expected I/N, e.g. 3/8 (slice 3 of 8)")
        return cls(int(found.group(1)), int(found.group(2)))

    @classmethod
    def whole(cls) -> Shard:
        return cls(1, 1)

    @property
    def is_whole(self) -> bool:
        return self.count == 1

    def tops(self, layout: Layout) -> list[str]:
        """This slice's first-level folders (a contiguous run of ``layout.tops()``)."""
        every = layout.tops()
        start = (self.index - 1) * len(every) // self.count
        end = self.index * len(every) // self.count
        return every[start:end]

    def holds(self, path: str, layout: Layout) -> bool:
        """Whether a variant path's first-level folder is in this slice."""
        return self.is_whole or path.split("/", 1)[0] in self.tops(layout)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
