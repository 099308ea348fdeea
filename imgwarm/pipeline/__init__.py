"""The pixel work: one module a step, and the order they run in.

    make.py       the pixel steps in their order: probe .. encode, files named by hash
    optimize.py   one source against the stores: reuse, make, publish, manifest, refusals
    batch.py      many sources at once, each with its own line
    isolate.py    the pixel work in worker processes, so that a native crash fails one source
    made.py       what making a source yields, as plain data (no pyvips)

Steps: sniff, jpeg (the header as libjpeg reads it), probe, exif, metadata, variants, memory
and budget, decode, resize, colour, orient, encode, quality (auto), placeholder, naming.
Where files go is the store's business (``imgwarm.store``); nothing here imports boto3.
"""
