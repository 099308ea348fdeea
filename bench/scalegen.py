"""A store of N cheap sources written directly, exactly as ``imgwarm optimize`` leaves one (for
bench/scale.py: the real optimize makes 150-240 tiny sources a second, days for 1M).

Per source, as optimize writes them: two variants (a 24x16 WebP and its JPEG fallback, each
made distinct by a counter in a chunk decoders skip, so every name is the SHA-256 of its own
bytes) in the sharded layout; the claim marker of each (``refs/<variant>/<key digest>``); the
manifest, by the real ``Manifest`` model's JSON at its key's place; a journal line (dated as
uploads at a steady rate that ended an hour ago). Once: the
store's format record and ``references.json`` (a store built from empty starts built).

Files are written straight (no temporary name, no fsync: nothing reads the store while it is
made), by ``processes`` processes, each a contiguous range of source numbers; folders made once.
``imgwarm fsck`` finds such a store clean (tests/bench/test_scalegen.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import struct
import time
from pathlib import Path
from typing import Any

from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.naming import file_name, slug_for
from imgwarm.store.changes import FOLDER as JOURNAL
from imgwarm.store.format import FORMAT_RECORD, STORE_FORMAT, imgwarm_version
from imgwarm.store.layout import Layout
from imgwarm.store.references import BUILT, REFS, key_digest

WIDTH, HEIGHT = 24, 16
HASH_LENGTH = 16  # the default hash_length setting
# A store is built over time: its journal dates source n at one upload a second (a busy
# site: 86k a day) up to HISTORY_ENDS seconds ago. Dated all "now", every entry fell in the
# five minutes a warm reads again after a first warm, and a quiet warm re-read the whole
# store's journal: what a real store's history never holds.
UPLOADS_A_SECOND = 1.0
HISTORY_ENDS = 3600.0


def _encoded() -> tuple[bytes, bytes]:
    """One tiny photo-like image as WebP and JPEG, encoded once by libvips."""
    import pyvips

    image = (pyvips.Image.xyz(WIDTH, HEIGHT)[0] * 8).cast("uchar")
    rgb = image.bandjoin([image.flip("horizontal"), image * 0 + 90]).copy(interpretation="srgb")
    return (bytes(rgb.webpsave_buffer(Q=80, strip=True)),
            bytes(rgb.jpegsave_buffer(Q=82, strip=True)))


def _vp8x(webp: bytes) -> bytes:
    """A simple (VP8) WebP's chunks behind a VP8X header: the extended form, which may carry
    chunks of its own after the image (readers skip those they do not know: the WebP
    container spec)."""
    assert webp[:4] == b"RIFF" and webp[8:12] == b"WEBP", "not a WebP"
    body = webp[12:]
    vp8x = b"VP8X" + struct.pack("<I", 10) + bytes(4) + (
        (WIDTH - 1).to_bytes(3, "little") + (HEIGHT - 1).to_bytes(3, "little"))
    return vp8x + body


def _webp(chunks: bytes, number: int) -> bytes:
    chunk = b"IMGW" + struct.pack("<I", 8) + number.to_bytes(8, "little")
    payload = b"WEBP" + chunks + chunk
    return b"RIFF" + struct.pack("<I", len(payload)) + payload


def _jpeg(jpeg: bytes, number: int) -> bytes:
    comment = b"imgwarm bench %d" % number  # a COM segment right after SOI
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + jpeg[2:]


def key_of(prefix: str, number: int) -> str:
    return f"{prefix}{number:08d}.jpg"


class _Writer:
    """Writes files under one root, making each folder once (parents first: no stat)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.made: set[str] = set()

    def _folder(self, folder: str) -> None:
        if folder in self.made:
            return
        parent = folder.rpartition("/")[0]
        if parent:
            self._folder(parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(f"{self.root}/{folder}", 0o755)
        self.made.add(folder)

    def write(self, relative: str, data: bytes) -> None:
        self._folder(relative.rpartition("/")[0])
        fd = os.open(f"{self.root}/{relative}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _sources(job: tuple[Path, Path, str, int, int, int, int, bytes, bytes, int, float]) -> int:
    origin, manifests, prefix, start, stop, max_entries, levels, webp, jpeg, total, ended = job
    layout = Layout(max_entries=max_entries, levels=levels)
    vp8x = _vp8x(webp)
    files, records = _Writer(origin), _Writer(manifests)
    last = total - 1
    journal: dict[str, list[str]] = {}
    for number in range(start, stop):
        key = key_of(prefix, number)
        digest = key_digest(key)
        slug = slug_for(key)
        variants = []
        for fmt, ext, data, quality in (("webp", "webp", _webp(vp8x, number), 80),
                                        ("jpeg", "jpg", _jpeg(jpeg, number), 82)):
            sha = hashlib.sha256(data).hexdigest()
            path = str(layout.path_for(file_name(slug, sha, ext, HASH_LENGTH), sha))
            files.write(path, data)  # variants, claims, manifest, journal: optimize's order
            records.write(f"{REFS}/{path}/{digest}", b"")
            variants.append(Variant(format=fmt, width=WIDTH, height=HEIGHT, bytes=len(data),
                                    path=path, quality=quality))
        manifest = Manifest(key=key, source_sha256=hashlib.sha256(key.encode()).hexdigest(),
                            width=WIDTH, height=HEIGHT, settings_digest="scalebench0000",
                            variants=variants)
        records.write(str(layout.path_for(f"{digest}.json", digest)), manifest.to_json().encode())
        made = ended - (last - number) / UPLOADS_A_SECOND
        hour = time.strftime("%Y/%m/%d/%H", time.gmtime(made))
        journal.setdefault(hour, []).append(
            json.dumps({"t": made, "key": key}, ensure_ascii=True) + "\n")
    for hour, lines in journal.items():
        log = manifests / JOURNAL / f"{hour}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="ascii") as out:  # one append of whole lines an hour
            out.write("".join(lines))
    return stop - start


def generate(origin: Path, manifests: Path, sources: int, *, prefix: str = "/bench/up/",
             processes: int = 2, start: int = 0, layout: Layout | None = None) -> dict[str, Any]:
    """Write ``sources`` sources numbered from ``start`` (keys ``{prefix}{n:08d}.jpg``) into a
    local origin and manifest store; returns what it took. Run again with another ``start``
    to add sources to the same store."""
    layout = layout or Layout()
    began = time.perf_counter()
    origin.mkdir(parents=True, exist_ok=True)
    manifests.mkdir(parents=True, exist_ok=True)
    (origin / FORMAT_RECORD).write_text(json.dumps(
        {"format": STORE_FORMAT, "readable_by": STORE_FORMAT,
         "written_by": f"imgwarm {imgwarm_version()}"}))
    if not (manifests / BUILT).exists():
        (manifests / BUILT).write_text(json.dumps({"built": time.time(), "by": os.getpid()}))
    webp, jpeg = _encoded()  # here, not in the forked processes: libvips's threads do not
    # survive a fork (a child's first libvips call can wait for ever)
    step = -(-sources // max(1, processes * 8))  # small jobs: the processes end together
    ended = time.time() - HISTORY_ENDS  # the store was built over time, up to a while ago
    jobs = [(origin, manifests, prefix, n, min(n + step, start + sources), layout.max_entries,
             layout.levels, webp, jpeg, start + sources, ended)
            for n in range(start, start + sources, step)]
    if processes <= 1 or len(jobs) == 1:
        done = sum(map(_sources, jobs))
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            done = sum(pool.imap_unordered(_sources, jobs))
    took = time.perf_counter() - began
    return {"sources": done, "s": round(took, 2), "per_s": round(done / took) if took else 0}
