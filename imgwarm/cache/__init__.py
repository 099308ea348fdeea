"""The cache server's tiers and ``warm``, which fills them: hot thumbnails on a tmpfs, every
variant on NVMe, placed by real traffic, in time with what changed.

    tiers.py      the RAM and NVMe tiers: Stores with the origin's layout, an identity each
    logformat.py  nginx log_format strings, compiled to read lines fast
    logs.py       access logs read incrementally: rotation, gzip, copytruncate
    rank.py       scores that decay, the prior of new uploads, density, the choice
    index.py      what is placed, and the scores, in SQLite
    warm.py       one run, in order
"""
