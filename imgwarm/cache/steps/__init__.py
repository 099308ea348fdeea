"""The steps of a warm run, each a function of the run's state (cache/run.py), in the order
warm.py writes down:

    check.py    each tier's identity (found empty: refilled), what a killed run left, and
                with --full the tiers as they are against the index
    sources.py  what the manifest store's journal says changed (or every record), into the
                index; ahead.py copies to the backing tier meanwhile
    evict.py    what leaves the tiers: deleted sources' variants, unreferenced ones, and
                ``evict`` itself (gc's part in the tiers uses it too)
    score.py    hotness from the access logs, pins from a hot list
    plan.py     what each tier should hold, by its policy (cache/policy.py)
    copy.py     the copies, in batches, each settled in the index
    finish.py   what each tier holds, RAM's hit share, budgets met
    trust.py    which tier files warm may trust: those it wrote, still the very ones
"""
