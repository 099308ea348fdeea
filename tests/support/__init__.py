"""Helpers the test suites share (conftest.py files hold fixtures only):

- fixtures.py: the shared fixtures (pytest_plugins in tests/conftest.py) and the markers a
  test gets from the real parts its fixtures start
- parts.py: a real part (program, root) found, or the test skipped with the reason (failed on CI)
- corpus.py: tests/corpus/ as test cases, and one real run over it
- files.py, cli.py: the repository's root, files under a folder; the CLI in-process
- images.py, hostile.py, hostile_logs.py, measure.py: test images, hostile inputs and logs,
  memory measures
- fuzzing.py, fuzz_*.py: the fuzzer's run and invariants; its table of source formats
  (fuzz_formats.py: seeds, mutations, strict decoders), JPEG's (fuzz_jpeg.py), byte and
  container mutations (fuzz_bytes.py, fuzz_containers.py), gain maps (fuzz_gainmap.py)
- pipeline.py: the pipeline run on test bytes
- sites.py, tmpfs.py, logs.py, lifecycle.py: a site with real variants in front of tiers, a
  real tmpfs, access logs, what a site's stores hold
- servers.py, queues.py, nginx.py: redis-server, moto's S3, SeaweedFS, workers; a queue as
  users drive it; a real nginx running the emitted config
- s3.py: the S3 servers as a test parameter ("moto", "seaweedfs") and each one's fixture
- versions.py: formats and versions: a store marked with a format record, snapshots of
  folders and buckets (a refused command changed nothing), indexes as older versions made them
- faults.py, invariants.py: fault injection (every store, journal and tier call counted, the
  Nth failing) and the lifecycle invariants checked on the real files
- released.py: the previous release (a fixed commit) installed in an environment of its own,
  to run beside this one (the rolling-upgrade tests)
"""
