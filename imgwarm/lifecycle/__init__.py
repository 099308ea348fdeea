"""The end of a variant's life: a source taken down at once, variants nobody names reclaimed
after a grace period. Moves no pixels (no pyvips here).

    reclaim.py    remove one variant from the origin unless a source names it, race-free
    delete.py     ``imgwarm delete``: a source's tombstone, then its variants
    gc.py         ``imgwarm gc``: variants named by no manifest, after the grace period
"""
