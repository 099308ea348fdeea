"""The cache server's tiers and ``warm``, which fills them: hot thumbnails on a tmpfs, every
variant on NVMe, placed by real traffic, in time with what changed.

    tiers.py      the RAM and NVMe tiers: Stores with the origin's layout, an identity each
    policy.py     the tiers' names and roles, and how warm fills each (budget, widest
                  variant, pages): the one place the tiers differ
    identity.py   what warm wrote: a tier file's identity, to trust it later
    logformat.py  nginx log_format strings, compiled to read lines fast
    logs.py       access logs read incrementally: rotation, gzip, copytruncate
    placeable.py  which requested paths can count as a variant's hotness
    rank.py       scores that decay, the prior of new uploads, density, the choice
    index/        what is placed, in SQLite: every statement on it, one concept a module
                  (schema and migrations, sources, scores, the planner, tier states)
    copier.py     files copied into the tiers, many at once
    lock.py       one run at a time on a server's tiers
    run.py        the state of one warm run
    steps/        the steps of a run, one module each
    report.py     what a run did
    warm.py       one run: its steps, in order
    collect.py    gc's part in the tiers
    heartbeat.py  when `warm --every` last finished a run, for health checks
"""
