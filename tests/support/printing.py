"""Files that make a native library print to the process's stdout."""

from __future__ import annotations

import pyvips

BRIGHT, DIM = (4.0, 3.0, 2.0), (0.4, 0.3, 0.2)  # linear light: 1.0 is SDR white


def hostile_ultra_hdr() -> bytes:
    """An Ultra HDR JPEG whose gain map carries XMP (in place of its ISO 21496-1 metadata,
    so that libultrahdr reads the XMP) starting with a DOCTYPE that holds an escape
    sequence: libultrahdr's XML reader refuses it, and prints the line."""
    bright = pyvips.Image.black(300, 400, bands=3) + list(BRIGHT)
    dim = pyvips.Image.black(500, 400, bands=3) + list(DIM)
    hdr = bright.join(dim, "horizontal").cast("float").copy(interpretation="scrgb")
    data = bytes(hdr.uhdrsave_buffer(Q=92))
    second = data.index(b"\xff\xd9\xff\xd8") + 4  # after the gain map's SOI
    assert data[second + 4:second + 31] == b"urn:iso:std:iso:ts:21496:-1"
    iso = int.from_bytes(data[second + 2:second + 4], "big")
    xmp = (b'http://ns.adobe.com/xap/1.0/\x00<!DOCTYPE x [<!ENTITY e "\x1b[31mEVIL">]>'
           b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
           b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
           b'xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" '
           b'hdrgm:GainMapMax="2.0"/></rdf:RDF></x:xmpmeta>')
    segment = b"\xff\xe1" + (len(xmp) + 2).to_bytes(2, "big") + xmp
    return data[:second] + segment + data[second + 2 + iso:]
