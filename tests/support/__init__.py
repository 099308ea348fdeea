"""Helpers the test suites share: fault injection (faults.py) and the lifecycle invariants
checked on the real files (invariants.py)."""
