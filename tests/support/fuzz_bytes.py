"""Byte mutations that any format meets, built from where its data lies and what its chunks
are: bit flips and zeroed runs in the data part, truncation, chunks duplicated or removed.

A format describes itself by two functions over a file's bytes: ``data`` gives the (start,
end) of its picture data (entropy-coded or compressed pixels), ``chunks`` the (start, end) of
each structural unit (PNG chunk, RIFF chunk, ISOBMFF box, TIFF strip, GIF block) that can be
duplicated or removed whole."""

from __future__ import annotations

import random
from collections.abc import Callable

Mutation = Callable[[random.Random, bytes], bytes | None]
Span = tuple[int, int]
Spans = Callable[[bytes], list[Span]]


def flip_data(data_of: Spans) -> Mutation:
    def flip(rng: random.Random, data: bytes) -> bytes | None:
        spans = [(a, b) for a, b in data_of(data) if b > a]
        if not spans:
            return None
        a, b = rng.choice(spans)
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(a, b)] ^= 1 << rng.randrange(8)
        return bytes(out)

    return flip


def zero_run(data_of: Spans) -> Mutation:
    """A run of zeroed bytes in the data: as a disk or a transfer loses a block (a GIF with
    one was published with 43% of its blocks wrong)."""
    def zero(rng: random.Random, data: bytes) -> bytes | None:
        spans = [(a, b) for a, b in data_of(data) if b - a > 2]
        if not spans:
            return None
        a, b = rng.choice(spans)
        at = rng.randrange(a, b - 1)
        length = min(b - at, rng.choice([2, 8, 32, 256, max(2, (b - a) // 3)]))
        return data[:at] + bytes(length) + data[at + length:]

    return zero


def flip_header(data_of: Spans) -> Mutation:
    """Bits flipped before the first data span: in the header, boxes and tables."""
    def flip(rng: random.Random, data: bytes) -> bytes | None:
        spans = data_of(data)
        end = min((a for a, _ in spans), default=len(data) // 2)
        if end < 2:
            return None
        out = bytearray(data)
        for _ in range(rng.randint(1, 2)):
            out[rng.randrange(0, end)] ^= 1 << rng.randrange(8)
        return bytes(out)

    return flip


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(1, len(data))]


def duplicate_chunk(chunks_of: Spans) -> Mutation:
    def duplicate(rng: random.Random, data: bytes) -> bytes | None:
        chunks = chunks_of(data)
        if not chunks:
            return None
        a, b = rng.choice(chunks)
        return data[:b] + data[a:b] + data[b:]

    return duplicate


def remove_chunk(chunks_of: Spans) -> Mutation:
    def remove(rng: random.Random, data: bytes) -> bytes | None:
        chunks = chunks_of(data)
        if not chunks:
            return None
        a, b = rng.choice(chunks)
        return data[:a] + data[b:]

    return remove


def generic(data_of: Spans, chunks_of: Spans) -> dict[str, Mutation]:
    """The byte mutations every format gets."""
    return {
        "flip-data": flip_data(data_of),
        "zero-run": zero_run(data_of),
        "flip-header": flip_header(data_of),
        "truncate": truncate,
        "duplicate-chunk": duplicate_chunk(chunks_of),
        "remove-chunk": remove_chunk(chunks_of),
    }


INTERESTING = (0, 1, 2, 7, 8, 255, 256, 4097, 9999, 10000, 16383, 16384, 65535, 65536, 1 << 24,
               0x7FFFFFFF, 0xFFFFFFFF)  # 10000: squared, just within the default max_pixels


def interesting(rng: random.Random, bits: int) -> int:
    """A value of ``bits`` bits that decoders get wrong: 0, 1, powers of two and their
    neighbours, the largest, or a random one."""
    top = (1 << bits) - 1
    return rng.choice([v for v in INTERESTING if v <= top] + [top, rng.randrange(top + 1)])
