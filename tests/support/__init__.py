"""Helpers the test suites share (conftest.py files hold fixtures only):

- fixtures.py: the shared fixtures (pytest_plugins in tests/conftest.py) and the markers a
  test gets from the real parts its fixtures start
- parts.py: a real part (program, root) found, or the test skipped with the reason (failed on CI)
- corpus.py: tests/corpus/ as test cases, and one real run over it
- files.py, cli.py: the repository's root, files under a folder; the CLI in-process
- images.py, hostile.py, hostile_logs.py, fuzzing.py, measure.py: test images, hostile inputs
  and logs, the fuzzer's mutations and invariants, memory measures
- pipeline.py: the pipeline run on test bytes
- sites.py, tmpfs.py, logs.py, lifecycle.py: a site with real variants in front of tiers, a
  real tmpfs, access logs, what a site's stores hold
- servers.py, queues.py, nginx.py: redis-server, moto's S3, workers; a queue as users drive
  it; a real nginx running the emitted config
- faults.py, invariants.py: fault injection (every store, journal and tier call counted, the
  Nth failing) and the lifecycle invariants checked on the real files
"""
