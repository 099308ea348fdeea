"""Memory: what making one source will take, estimated from its header before any decode.

Measured (peak RSS above an idle process, bench/fuzz.py --memory): a progressive or
multi-scan JPEG holds every DCT coefficient (two bytes a coefficient, 64 a block, per
component at its own sampling: 763 MiB for a 10000x10000 CMYK file, whatever the
shrink-on-load), and a JPEG's pixels are decoded whole at their shrink-on-load size; an
interlaced PNG holds the whole decoded image, a plain one is read row by row. Then the largest
variant is held in memory (twice while it is rotated), handed to Pillow as RGBX, and encoded.
The estimate errs high, never low.
"""

from __future__ import annotations

from imgwarm.pipeline.decode import decoded_size
from imgwarm.pipeline.probe import Probe

MIB = 1 << 20
_FIXED = 40 * MIB  # libvips line buffers and thread state, encoder tables, Python objects
_PER_PIXEL = 20  # bytes per pixel of the largest variant: RGB + rotated copy + RGBX + encoders
_ALPHA_PER_PIXEL = 4  # bytes a source pixel for premultiplied floats (measured up to 2.4)
# The auto quality search, a variant at a time: SSIMULACRA2's planes of the reference (48 bytes
# a pixel, held) and one score's maps (137 at the peak; tracemalloc at 1920x1280), a candidate.
_SEARCH_PER_PIXEL = 150


def decode_cost(probe: Probe, width: int, height: int, searched: bool = False) -> int:
    """Bytes of memory, beyond an idle process, to make the variants of a source whose largest
    variant is ``width`` x ``height`` (as displayed): the file and its copy for the decoder,
    what the decoder holds for the whole image, the decoded pixels (a JPEG is decoded whole,
    at its shrink-on-load size), and the working copies of the largest variant (with, when
    ``searched``, what its auto quality search holds)."""
    stored = (height, width) if probe.transposed else (width, height)
    columns, rows = decoded_size(probe, *stored)
    decoded = columns * rows * probe.bands if probe.format == "jpeg" else 0
    # Transparent pictures are resampled premultiplied, in floats: libvips' buffers for that
    # took up to 2.4 bytes a source pixel more (measured at 9000x9000, RGBA and grey+alpha).
    premultiplied = _ALPHA_PER_PIXEL * columns * rows if probe.alpha else 0
    return (_FIXED + 2 * len(probe.data) + probe.buffered + decoded + premultiplied
            + (_PER_PIXEL + (_SEARCH_PER_PIXEL if searched else 0)) * width * height)


def describe(cost: int) -> str:
    return f"{cost / MIB:,.0f} MiB"
