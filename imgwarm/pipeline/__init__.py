"""The work itself: probe, decode, transform, encode, metadata, naming, layout, manifest, storage.

The order of the steps is written once, in ``imgwarm.pipeline.optimize``.
"""
