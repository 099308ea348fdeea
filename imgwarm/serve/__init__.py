"""Serving: what a page and nginx need to deliver the variants. Moves no pixels (no pyvips here).

    nginx.py      the nginx config (from templates/*.j2): RAM tier, then NVMe, then the origin
                  (a folder, or S3 through proxy_pass), immutable caching, the access log
    pages.py      which images each page shows, and its preload Link header
    confsafe.py   strings that go into a config: quoted so they stay what they are, or refused
    picture.py    ``<picture>`` tags from a manifest, and the Jinja2 filter
    gallery.py    a page of them, its pages file and its config
    server.py     nginx running a gallery in the foreground (``imgwarm serve``)
    written.py    configs and pages written whole or not at all
"""
