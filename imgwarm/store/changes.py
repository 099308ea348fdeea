"""Changes: a journal of the manifest store, so that a reader learns what changed since it last
looked without listing every manifest.

Each manifest or failure written adds one entry (the source key, the time). A reader keeps a
cursor and reads only what came after it: a cache server's ``warm`` runs in time with what
changed, not with how many sources there are.

- Local: one file an hour (``changes/YYYY/MM/DD/HH.log``, UTC), a JSON line an entry, appended
  with O_APPEND (a whole line per write). The cursor is a file and an offset.
- S3: one small object an entry, named by time (``changes/YYYY/MM/DD/HH/<ns>-<random>``), so
  that a listing that starts after the cursor returns the new ones only. Writers' clocks
  differ: each read looks again over the last ``SKEW`` seconds, skipping names already seen.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from imgwarm.exceptions import StorageError
from imgwarm.store.local import make_folders

if TYPE_CHECKING:
    from imgwarm.store.s3 import S3Store

SKEW = 300  # seconds of clock difference between writers that an S3 reader allows for
FOLDER = "changes"
MAX_ENTRY = 64 * 1024  # bytes of one entry: a source key is far shorter
_LOCAL_CURSOR = re.compile(r"(?:\d{4}/\d{2}/\d{2}/\d{2}\.log:\d{1,15})?")
_S3_NAME = re.compile(rf"{FOLDER}/\d{{4}}/\d{{2}}/\d{{2}}/\d{{2}}/(\d{{20}})-[0-9A-Za-z]{{1,64}}")


@dataclass
class Batch:
    """Entries after a cursor, oldest first, and the cursor to give next time."""

    entries: list[tuple[float, str]] = field(default_factory=list)  # (unix time, source key)
    cursor: str = ""


class ChangeLog(Protocol):
    def append(self, key: str) -> None:
        """Note that the record of ``key`` changed (made, made again, failed, deleted)."""
        ...

    def since(self, cursor: str) -> Batch:
        """What came after ``cursor`` ("" for the beginning)."""
        ...

    def now(self) -> str:
        """A cursor at this moment: what a reader that has just listed everything gives."""
        ...

    def readable(self, cursor: str) -> bool:
        """Whether ``cursor`` is one of this journal's (else the reader lists everything)."""
        ...


def _entry(raw: bytes) -> tuple[float, str] | None:
    """(time, key) of one entry; None for a damaged or hostile one (never fatal)."""
    if len(raw) > MAX_ENTRY:
        return None
    try:
        entry = json.loads(raw)
        when, key = float(entry["t"]), entry["key"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return (when, key) if math.isfinite(when) and isinstance(key, str) and key else None


def _hour(t: float) -> str:
    return time.strftime("%Y/%m/%d/%H", time.gmtime(t))


class LocalChangeLog:
    """Hourly files under ``root/changes``."""

    def __init__(self, root: Path) -> None:
        self.root = root / FOLDER

    def append(self, key: str) -> None:
        now = time.time()
        path = self.root / f"{_hour(now)}.log"
        line = (json.dumps({"t": now, "key": key}, ensure_ascii=True) + "\n").encode()
        try:
            make_folders(path.parent)  # 0755 whatever the umask, as the store's
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, line)  # one write: appenders never interleave within a line
            finally:
                os.close(fd)
        except OSError as error:
            raise StorageError(f"cannot record a change in {path}: {error.strerror}") from None

    def _files(self, after: str) -> Iterator[str]:
        """Hour files (``YYYY/MM/DD/HH.log``) from ``after``'s on, in order, looking only in
        the folders that can hold them."""
        start = after.split("/")[:3] if after else []
        yield from self._walk([], start)

    def _walk(self, parts: list[str], start: list[str]) -> Iterator[str]:
        folder = self.root.joinpath(*parts)
        try:
            names = sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):  # a stray file is no hour
            return
        level = len(parts)
        for name in names:
            if level < 3:
                if start and name < start[level] and parts == start[:level]:
                    continue
                yield from self._walk([*parts, name], start)
            elif name.endswith(".log"):
                yield "/".join([*parts, name])

    def since(self, cursor: str) -> Batch:
        done_file, _, done_offset = cursor.partition(":")
        batch = Batch(cursor=cursor)
        for name in self._files(done_file):
            if done_file and name < done_file:
                continue
            offset = int(done_offset or 0) if name == done_file else 0
            with (self.root / name).open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
            end = data.rfind(b"\n") + 1  # a line still being written waits for next time
            batch.entries.extend(e for e in map(_entry, data[:end].splitlines()) if e)
            batch.cursor = f"{name}:{offset + end}"
        return batch

    def now(self) -> str:
        name = f"{_hour(time.time())}.log"
        try:
            size = (self.root / name).stat().st_size
        except FileNotFoundError:
            size = 0
        return f"{name}:{size}"

    def readable(self, cursor: str) -> bool:
        return _LOCAL_CURSOR.fullmatch(cursor) is not None


class S3ChangeLog:
    """One object an entry under the store's prefix."""

    def __init__(self, store: S3Store, workers: int = 16) -> None:
        self.store = store
        self.workers = workers

    def append(self, key: str) -> None:
        now = time.time()
        name = f"{FOLDER}/{_hour(now)}/{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"
        body = json.dumps({"t": now, "key": key}, ensure_ascii=True).encode()
        self.store.write(name, body, replace=True)

    def _listed(self, start_after: str) -> list[str]:
        names: list[str] = []
        prefix = f"{self.store.prefix}{FOLDER}/"
        pages = self.store.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.store.bucket, Prefix=prefix,
            StartAfter=f"{self.store.prefix}{start_after}" if start_after else "")
        try:
            for page in pages:
                names.extend(o["Key"][len(self.store.prefix):] for o in page.get("Contents", []))
        except Exception as error:  # boto3's own kinds: say where
            raise StorageError(f"cannot list {self.store.describe(FOLDER)}: {error}") from None
        return names

    def since(self, cursor: str) -> Batch:
        """Cursor: JSON {"after": name, "seen": [names within SKEW of it]}."""
        state: dict[str, Any] = json.loads(cursor) if cursor else {"after": "", "seen": []}
        after, seen = state["after"], set(state["seen"])
        start = ""
        if after:
            earlier = _ns(after) / 1e9 - SKEW
            start = f"{FOLDER}/{_hour(earlier)}/{int(earlier * 1e9):020d}"
        fresh = [n for n in self._listed(start) if n not in seen and _S3_NAME.fullmatch(n)]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            bodies = list(pool.map(self.store.read, fresh))
        batch = Batch()
        batch.entries = sorted(e for e in map(_entry, (b or b"" for b in bodies)) if e)
        newest = max([after, *fresh]) if fresh or after else ""
        if newest:
            ns = _ns(newest)
            window = {n for n in seen | set(fresh) if _ns(n) > ns - SKEW * 1e9}
            batch.cursor = json.dumps({"after": newest, "seen": sorted(window)})
        return batch

    def now(self) -> str:
        """The entries of the last SKEW seconds count as seen: a reader that lists every
        manifest after this has their records."""
        earlier = time.time() - SKEW
        start = f"{FOLDER}/{_hour(earlier)}/{int(earlier * 1e9):020d}-"
        recent = [n for n in self._listed(start) if _S3_NAME.fullmatch(n)]
        return json.dumps({"after": max([start, *recent]), "seen": recent})

    def readable(self, cursor: str) -> bool:
        try:
            state = json.loads(cursor)
            return isinstance(state, dict) and isinstance(state.get("seen"), list) and \
                isinstance(state.get("after"), str) and \
                (not state["after"] or _ns(state["after"]) >= 0)
        except (ValueError, TypeError, RecursionError):
            return False


def _ns(name: str) -> int:
    """The time (ns) in an S3 entry's name; -1 for a name that is none of ours."""
    found = _S3_NAME.fullmatch(name)
    if found is None:
        found = re.fullmatch(rf"{FOLDER}/\d{{4}}/\d{{2}}/\d{{2}}/\d{{2}}/(\d{{20}})-?", name)
    return int(found.group(1)) if found else -1
