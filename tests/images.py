"""Moved to tests/support/images.py. Kept for tests/lifecycle/test_faults.py until it imports
from there; nothing else imports this module."""

from tests.support.images import jpeg_with_exif, photo

__all__ = ["jpeg_with_exif", "photo"]
