"""Stores: the Store interface and its implementations, the shard layout and key checks, and
the manifest store. Moves and keeps files; never decodes an image (no pyvips here), and S3
(boto3) is imported only when an S3 store is made.

    base.py       the Store protocol every implementation passes (tests/store/test_contract.py)
    local.py      a local folder, written atomically (O_TMPFILE, or a hidden temp + rename)
    fdio.py       its raw descriptor I/O: whole reads and writes, /proc/self/fd, the umask
    s3.py         any S3 endpoint through boto3
    layout.py     shard folders from the hash in a name; keys that cannot leave their root
    manifests.py  one record per source key, in any Store
    changes.py    the manifest store's journal: what changed, for readers that follow it
    references.py which sources name each variant, and since when one is named by none
    reclaim.py    a variant removed unless a source names it, race-free
    listing.py    sharded trees listed side by side (an S3 bucket's pages at once)
    origin.py     the origin: originals by key, variants, manifests (local or S3)
    format.py     the store's format record (imgwarm-format.json) and the gate before each
                  read and write
"""

from __future__ import annotations

from imgwarm.exceptions import ObjectTooLarge
from imgwarm.store.base import Store
from imgwarm.store.layout import Layout, join_under, safe_relative
from imgwarm.store.local import LocalStore
from imgwarm.store.manifests import ManifestStore
from imgwarm.store.origin import Stores, check_source_key, local_key, read_original

__all__ = ["Layout", "LocalStore", "ManifestStore", "ObjectTooLarge", "Store", "Stores",
           "check_source_key", "join_under", "local_key", "read_original", "safe_relative"]
