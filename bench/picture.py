"""Benchmark the picture tags in Chromium: a gallery of camera photos loaded over a slow
network as a site would have it without imgwarm, then with imgwarm's tags and preload.

    load         the same gallery, served by the same nginx (``imgwarm serve``: the emitted
                 config), loaded by Debian's Chromium through Playwright with the network
                 throttled by the DevTools protocol (1.6 Mbps down, 150 ms RTT, cache off),
                 at 390x844 CSS px, DPR 2 (a phone): once as the original JPEGs in plain
                 <img> tags, once with imgwarm's <picture> tags and the page's preload Link.
                 Image bytes transferred until the load event, Largest Contentful Paint, the
                 time until every image above the fold has painted, and a screenshot of each
                 at the same moment (SHOT_AT after navigation starts).
    placeholders the LQIP imgwarm keeps (a 16-px WebP data URI) against a ThumbHash (~25
                 bytes, shown without a script only as a PNG rendered from it on the
                 server): characters each puts in a page, and how like the photo each looks
                 (correlation of 16x12 pixels against the photo).

Usage (a quiet machine: no tests, no other sessions; nginx and chromium installed):
    .venv/bin/python bench/picture.py                  # both parts
    .venv/bin/python bench/picture.py --parts load

The Markdown table is printed and, with the raw numbers, written to bench/results/picture.json;
the screenshots go to bench/screenshots/ (docs/benchmarks.md shows them).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
from common import HERE, IMGWARM, run_parts  # bench/common.py
from PIL import Image

from imgwarm.cache.warm import warm
from imgwarm.config import Settings, load_settings
from imgwarm.manifest import Credits, Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.serve.gallery import COLUMN, HERO_WIDTH, write_gallery
from imgwarm.store import Stores
from tests.support.corpus import corpus_dir
from tests.support.servers import free_port, wait_for

# Camera photos of the corpus (the bad inputs and tiny test images left out)
PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg", "ultra-hdr.jpg", "xmp_test.jpg",
          "canon_hdr_YES.jpg", "33-type_error.jpg", "pyvips_sample.jpg",
          *(f"Landscape_{i}.jpg" for i in range(1, 9))]
VIEW = {"width": 390, "height": 844}
DPR = 2
NETWORK = {"offline": False, "latency": 150, "downloadThroughput": 1_600_000 / 8,
           "uploadThroughput": 750_000 / 8}
SHOT_AT = 3.0  # seconds after navigation starts: the screenshots' moment
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = HERE / "screenshots"
TITLE = "Gallery"  # both pages: the same layout above the fold

# In the page before it loads: LCP, and when every image above the fold has painted
# (the first frame after all of them are complete).
MEASURE = """
window.__lcp = 0;
new PerformanceObserver(l => { for (const e of l.getEntries()) window.__lcp = e.startTime; })
    .observe({type: 'largest-contentful-paint', buffered: true});
window.__atf = null;
document.addEventListener('DOMContentLoaded', () => {
    const above = [...document.images].filter(i => i.getBoundingClientRect().top < innerHeight);
    const tick = () => {
        if (above.every(i => i.complete && i.naturalWidth > 0)) window.__atf = performance.now();
        else requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
});
"""

ORIGINAL_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
  body {{ margin: 0 auto; max-width: {hero}px; padding: 16px;
         font: 16px/1.4 system-ui, sans-serif; }}
  h1 {{ font-size: 1.4rem; margin: 0 0 12px; }}
  img {{ display: block; width: 100%; height: auto; }}
  .hero {{ margin: 0 0 16px; }}
  .grid {{ display: grid; gap: 12px;
           grid-template-columns: repeat(auto-fill, minmax({column}px, 1fr)); }}
  figure {{ margin: 0; }}
</style></head>
<body><h1>{title}</h1>
<figure class="hero"><img src="/original/{first}" alt=""></figure>
<div class="grid">
{rest}
</div></body></html>
"""


def _settings(work: Path) -> Settings:
    return load_settings(
        origin_root=work / "origin", manifest_root=work / "manifest", nvme_root=work / "nvme",
        ram_root=Path("/dev/shm") / f"imgwarm-bench-{os.getpid()}", cache_state=work / "state",
        formats="avif,webp,jpeg", fsync=False)


def _site(work: Path, corpus: Path) -> tuple[Settings, list[Manifest], Path]:
    """The photos optimized and warmed, the gallery written, the originals beside it."""
    settings = _settings(work)
    stores = Stores.for_settings(settings.store)
    manifests = [optimize_file(corpus / name, settings=settings, stores=stores,
                               credits=Credits.given(description=name)).manifest
                 for name in PHOTOS]
    warm(settings)
    www = work / "www"
    write_gallery(settings, manifests, www, title=TITLE)
    (www / "original").mkdir()
    for name in PHOTOS:
        shutil.copy(corpus / name, www / "original" / name)
    rest = "\n".join(f'<figure><img src="/original/{n}" alt=""></figure>' for n in PHOTOS[1:])
    (www / "original" / "index.html").write_text(ORIGINAL_PAGE.format(
        hero=HERO_WIDTH, column=COLUMN, first=PHOTOS[0], rest=rest, title=TITLE))
    return settings, manifests, www


@contextlib.contextmanager
def _served(settings: Settings, www: Path) -> Iterator[str]:
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")},
           "IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root),
           "IMGWARM_NVME_ROOT": str(settings.cache.nvme_root),
           "IMGWARM_RAM_ROOT": str(settings.cache.ram_root)}
    server = subprocess.Popen([str(IMGWARM), "serve", "--gallery", str(www), "--port",
                               str(port)], env=env)
    try:
        wait_for(lambda: _answers(port), "imgwarm serve")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=20)


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
            return True
    except OSError:
        return False


def _load(browser: Any, url: str, shot: Path) -> dict[str, Any]:
    context = browser.new_context(viewport=VIEW, device_scale_factor=DPR)
    context.add_init_script(MEASURE)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    cdp.send("Network.emulateNetworkConditions", NETWORK)
    kinds: dict[str, str] = {}
    sizes: dict[str, float] = {}
    cdp.on("Network.responseReceived", lambda e: kinds.__setitem__(
        e["requestId"], "data" if e["response"]["url"].startswith("data:") else e["type"]))
    cdp.on("Network.loadingFinished",
           lambda e: sizes.__setitem__(e["requestId"], e["encodedDataLength"]))
    started = time.monotonic()
    page.goto(url, wait_until="commit")
    page.wait_for_timeout(max(0.0, SHOT_AT - (time.monotonic() - started)) * 1000)
    page.screenshot(path=str(shot), type="jpeg", quality=70)
    page.wait_for_load_state("load", timeout=600_000)
    page.wait_for_function("window.__atf !== null", timeout=600_000)
    page.wait_for_timeout(500)  # the last LCP entry
    found = page.evaluate("({lcp: window.__lcp, atf: window.__atf})")
    images = [r for r, kind in kinds.items() if kind == "Image"]
    context.close()
    return {"image_bytes": sum(sizes.get(r, 0) for r in images), "images": len(images),
            "lcp_ms": found["lcp"], "above_fold_ms": found["atf"]}


def bench_load(work: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    corpus = corpus_dir()
    settings, _, www = _site(work, corpus)
    SCREENSHOTS.mkdir(exist_ok=True)
    try:
        with _served(settings, www) as base, sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            original = _load(browser, f"{base}/original/", SCREENSHOTS / "original.jpg")
            imgwarm = _load(browser, f"{base}/", SCREENSHOTS / "imgwarm.jpg")
            browser.close()
    finally:
        shutil.rmtree(settings.cache.ram_root, ignore_errors=True)
    return {"original": original, "imgwarm": imgwarm,
            "bytes_ratio": imgwarm["image_bytes"] / original["image_bytes"],
            "lcp_ratio": imgwarm["lcp_ms"] / original["lcp_ms"],
            "above_fold_ratio": imgwarm["above_fold_ms"] / original["above_fold_ms"],
            "photos": len(PHOTOS), "shot_at_s": SHOT_AT}


_THUMBHASH_JS = """
const t = require('thumbhash');
let input = '';
process.stdin.on('data', d => input += d).on('end', () => {
    const {w, h, rgba} = JSON.parse(input);
    const hash = t.rgbaToThumbHash(w, h, Buffer.from(rgba, 'base64'));
    const out = t.thumbHashToRGBA(hash);
    console.log(JSON.stringify({hash: Buffer.from(hash).toString('base64'), w: out.w, h: out.h,
        rgba: Buffer.from(out.rgba).toString('base64'), url: t.thumbHashToDataURL(hash)}));
});
"""


def _thumbhash(image: Image.Image, node_modules: Path) -> tuple[bytes, Image.Image, str]:
    """A ThumbHash of the picture by the reference implementation (Evan Wallace's, npm
    ``thumbhash``, run by node), the picture it decodes to, and the PNG data URL the same
    implementation renders from it (what a page without script would inline)."""
    small = image.convert("RGBA")
    small.thumbnail((100, 100))
    given = json.dumps({"w": small.width, "h": small.height,
                        "rgba": base64.b64encode(small.tobytes()).decode()})
    done = subprocess.run(["node", "-e", _THUMBHASH_JS], input=given, capture_output=True,
                          text=True, check=True, env={**os.environ, "NODE_PATH": str(node_modules)})
    found = json.loads(done.stdout)
    decoded = Image.frombytes("RGBA", (found["w"], found["h"]), base64.b64decode(found["rgba"]))
    return base64.b64decode(found["hash"]), decoded.convert("RGB"), found["url"]


def _node_thumbhash(work: Path) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise SystemExit("the placeholder part runs ThumbHash's reference implementation: it "
                         "needs node and npm (apt-get install nodejs npm)")
    subprocess.run(["npm", "install", "--silent", "--prefix", str(work / "node"),
                    "thumbhash@0.1.1"], check=True)
    return work / "node" / "node_modules"


def _like(a: Image.Image, b: Image.Image) -> float:
    x = numpy.asarray(a.convert("RGB").resize((16, 12)), dtype=float).ravel()
    y = numpy.asarray(b.convert("RGB").resize((16, 12)), dtype=float).ravel()
    return float(numpy.corrcoef(x, y)[0, 1])


def bench_placeholders(work: Path) -> dict[str, Any]:
    corpus = corpus_dir()
    node_modules = _node_thumbhash(work)
    settings = _settings(work).updated(formats="webp,jpeg", widths="320")
    stores = Stores.for_settings(settings.store)
    rows = []
    for name in [*PHOTOS, "kodim03.png", "kodim07.png"]:
        manifest = optimize_file(corpus / name, settings=settings, stores=stores).manifest
        assert manifest.placeholder is not None
        variant = next(v for v in manifest.variants if v.format == "jpeg")
        photo = Image.open(settings.store.origin_root / variant.path).convert("RGB")
        lqip = Image.open(io.BytesIO(base64.b64decode(manifest.placeholder.lqip.split(",")[1])))
        hashed, decoded, url = _thumbhash(photo, node_modules)
        rows.append({
            "photo": name, "lqip_chars": len(manifest.placeholder.lqip),
            "thumbhash_bytes": len(hashed),
            "thumbhash_png_uri_chars": len(url),
            "lqip_likeness": _like(lqip, photo), "thumbhash_likeness": _like(decoded, photo)})
    return {"rows": rows, **{f"median_{k}": statistics.median(r[k] for r in rows)
                             for k in rows[0] if k != "photo"}}


def _table(results: dict[str, Any]) -> str:
    lines = []
    load = results.get("load")
    if load:
        o, i = load["original"], load["imgwarm"]
        lines += [
            "| measure (390x844 CSS px, DPR 2, 1.6 Mbps, 150 ms RTT, cache off) | original "
            "JPEGs in <img> | imgwarm <picture> + preload | ratio | target |",
            "|---|---|---|---|---|",
            f"| image bytes transferred until load ({load['photos']} photos) | "
            f"{o['image_bytes'] / 2**10:,.0f} KiB ({o['images']} images) | "
            f"{i['image_bytes'] / 2**10:,.0f} KiB ({i['images']} images) | "
            f"{load['bytes_ratio']:.3f} | <= 0.10 |",
            f"| Largest Contentful Paint | {o['lcp_ms'] / 1000:.2f} s | "
            f"{i['lcp_ms'] / 1000:.2f} s | {load['lcp_ratio']:.3f} | <= 0.5 |",
            f"| every image above the fold painted | {o['above_fold_ms'] / 1000:.2f} s | "
            f"{i['above_fold_ms'] / 1000:.2f} s | {load['above_fold_ratio']:.3f} | |",
        ]
    found = results.get("placeholders")
    if found:
        lines += [
            "", "| placeholder (median of the corpus photos) | characters in the page | "
            "likeness to the photo (correlation, 16x12 px) |", "|---|---|---|",
            f"| LQIP: 16-px WebP data URI (imgwarm) | {found['median_lqip_chars']:.0f} | "
            f"{found['median_lqip_likeness']:.3f} |",
            f"| ThumbHash (needs a script to show) | {found['median_thumbhash_bytes'] * 4 / 3:.0f}"
            f" (base64 of {found['median_thumbhash_bytes']:.0f} bytes) | "
            f"{found['median_thumbhash_likeness']:.3f} |",
            f"| ThumbHash rendered to a PNG data URI on the server (no script) | "
            f"{found['median_thumbhash_png_uri_chars']:.0f} | "
            f"{found['median_thumbhash_likeness']:.3f} |",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="placeholders,load")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "picture.json")
    args = parser.parse_args()
    run_parts("picture", args.parts, {"placeholders": bench_placeholders, "load": bench_load},
              _table, args.output)
    print(json.dumps({"screenshots": [str(p) for p in sorted(SCREENSHOTS.glob("*.jpg"))]}))


if __name__ == "__main__":
    main()
