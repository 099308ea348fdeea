"""The end of a variant's life: a source taken down at once, variants nobody names reclaimed
after a grace period. Moves no pixels (no pyvips here).

    delete.py     ``imgwarm delete``: a source's tombstone, then its variants
    gc.py         ``imgwarm gc``: variants named by no manifest, after the grace period
    fsck.py       ``imgwarm fsck``: a store's bad states counted, repaired where safe

(``store/reclaim.py`` removes a variant unless a source names it: optimize uses it too.)
"""
