"""Memory: what making one source will take, estimated from its header before any decode.

Measured as peak RSS above an idle worker-like process (tests/pipeline/test_memory_formats.py,
bench/fuzz.py --memory), and modelled on what each decoder holds:

- JPEG: a progressive or multi-scan file holds every DCT coefficient (two bytes a
  coefficient, 64 a block, per component at its own sampling: 763 MiB for a 10000x10000 CMYK
  file, whatever the shrink-on-load); the pixels are decoded whole at their shrink-on-load size.
- PNG: a plain one is read row by row; an interlaced one is decoded whole (bands x bytes a
  sample, so 16-bit counts twice).
- WebP, lossy or lossless alike: libvips decodes into an RGBA frame and paints it onto an
  RGBA canvas, 8 bytes a pixel; libwebp's own buffer (a lossless image's ARGB, 4 bytes a
  pixel; a lossy one's alpha plane) is freed before the canvas is painted. Measured 7.6-8.1.
- AVIF and HEIF: the codec's picture, libheif's copy and its conversion to interleaved
  RGB(A), libvips' image: measured 15 (8-bit 4:2:0), 18 (4:4:4), 17-24 (10- and 12-bit) and
  26 (10-bit 4:4:4 with alpha) bytes a pixel; counted as 5 a channel plus 2 a channel and
  byte of a sample (3 channels, 4 with alpha): 21 for 8-bit, 27 for 10-bit, 36 with alpha.
- GIF: libnsgif's RGBA bitmap, 4 bytes a pixel (5.3 measured with the resize below).
- TIFF: one strip or tile may cover the whole image: one decoded image (bands x bytes a
  sample); samples beyond colour and alpha are refused on the header (probe.py).
- Every format is then resized from its decoded size through libvips' line caches (up to
  about 1,500 rows of the source, and up to 13.5 MiB a libvips thread), the largest variant
  held in memory (twice while it is rotated), handed to Pillow as RGBX, and encoded.

Peak over estimate (12 MP; 48 MP for WebP and GIF): JPEG 0.32-0.44, PNG 0.38-0.54, WebP 0.74,
AVIF 0.40-0.50, TIFF 0.30-0.40, GIF 0.74; AVIF at 48 MP 0.43-0.79 (12-bit 4:4:4 the most); at
100 MP: WebP 0.83-0.84, GIF 0.84, plain PNG 0.55-0.77, TIFF 0.25. The estimate errs high,
never low: a 12 MP photo is estimated at 110-360 MiB (AVIF the most) with two libvips threads.
"""

from __future__ import annotations

import pyvips

from imgwarm.pipeline.decode import decoded_size
from imgwarm.pipeline.probe import Probe
from imgwarm.reporting import mib

MIB = 1 << 20
_FIXED = 40 * MIB  # libvips line buffers and thread state, encoder tables, Python objects
_PER_PIXEL = 20  # bytes per pixel of the largest variant: RGB + rotated copy + RGBX + encoders
_ALPHA_PER_PIXEL = 4  # bytes a source pixel for premultiplied floats (measured up to 2.4)
# The auto quality search, a variant at a time: SSIMULACRA2's planes of the reference (48 bytes
# a pixel, held) and one score's maps (137 at the peak; tracemalloc at 1920x1280), a candidate.
_SEARCH_PER_PIXEL = 150
# The resize from the decoded size reads through libvips' line caches: up to about 1,500 rows
# of its input (measured at 4000 to 16000 columns), and each libvips thread has regions of its
# own: 1.5-13.5 MiB a thread (measured with 2 and 16 threads, sources 2000 to 16000 pixels
# wide, variants 320 to 1920; 13 for a transparent one's floats at 4000 to 1920), within
# 8 KiB a variant column plus 256 bytes a source column.
# _FIXED and _PER_PIXEL were measured with two threads: only the threads past two are added.
_RESIZE_ROWS = 2048
_THREAD_PER_COLUMN = 8 << 10  # bytes per variant column, per libvips thread
_THREAD_PER_SOURCE_COLUMN = 256
_THREADS_MEASURED = 2


def _resize(columns: int, rows: int, bands: int, sample_bytes: int, width: int) -> int:
    held = columns * min(rows, _RESIZE_ROWS) * bands * sample_bytes
    threads: int = pyvips.concurrency_get()
    each = _THREAD_PER_COLUMN * width + _THREAD_PER_SOURCE_COLUMN * columns
    return held + max(0, threads - _THREADS_MEASURED) * each


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
    # (with alpha, the resize reads premultiplied floats)
    resize = _resize(columns, rows, probe.bands, 4 if probe.alpha else probe.sample_bytes,
                     stored[0])
    return (_FIXED + 2 * len(probe.data) + probe.buffered + decoded + premultiplied + resize
            + (_PER_PIXEL + (_SEARCH_PER_PIXEL if searched else 0)) * width * height)


def describe(cost: int) -> str:
    return mib(cost, digits=0)
