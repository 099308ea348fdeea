"""Orient: apply the EXIF Orientation to the pixels, so outputs need no tag."""

from __future__ import annotations

import pyvips


def upright(image: pyvips.Image, orientation: int) -> pyvips.Image:
    """Rotate/flip for Orientation 2..8; 1 (and anything out of range) is left as is.

    Needs random access: call it on an in-memory image.
    """
    if 2 <= orientation <= 8:
        tagged = image.copy()
        tagged.set_type(pyvips.GValue.gint_type, "orientation", orientation)
        return tagged.autorot()
    if image.get_typeof("orientation"):
        image = image.copy()
        image.remove("orientation")
    return image
