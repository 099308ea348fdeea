"""Make docs/assets/gallery.png: the quick start's gallery, served by `imgwarm serve`, as Debian's
Chromium shows it (Playwright, no browser download), kept under 300 KB.

    .venv/bin/python docs/screenshot.py        # needs nginx and chromium (./test.sh installs them)

It works in a folder of its own (the sample photos, their variants and the gallery), never in
the checkout's var/.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parent / "assets" / "gallery.png"
IMGWARM = str(Path(sys.executable).parent / "imgwarm")
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1100, "height": 800}
WIDTH = 880  # of the picture in the docs
LIMIT = 300_000  # bytes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def capture(work: Path, raw: Path) -> None:
    env = dict(os.environ, PATH=os.environ["PATH"] + ":/usr/sbin")
    run = {"cwd": work, "env": env, "check": True, "stdout": subprocess.DEVNULL}
    subprocess.run([IMGWARM, "samples", "var/samples"], **run)  # type: ignore[call-overload]
    subprocess.run([IMGWARM, "optimize", "var/samples"], **run)  # type: ignore[call-overload]
    subprocess.run([IMGWARM, "gallery", "--out", "var/gallery"], **run)  # type: ignore[call-overload]
    port = free_port()
    server = subprocess.Popen([IMGWARM, "serve", "--gallery", "var/gallery", "--port", str(port)],
                              cwd=work, env=env)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_load_state("networkidle")
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the lazy ones
            page.wait_for_timeout(800)
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_timeout(500)
            page.screenshot(path=str(raw), full_page=True)
            browser.close()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)


def shrink(raw: Path) -> None:
    """WIDTH px wide, 256 colours with dithering: smooth photos stay smooth, the file small."""
    image = Image.open(raw).convert("RGB")
    image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.LANCZOS)
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    image.quantize(palette=palette, dither=Image.Dither.FLOYDSTEINBERG).save(OUT, optimize=True)
    size = OUT.stat().st_size
    print(f"{OUT}: {size:,} bytes")
    if size > LIMIT:
        sys.exit(f"over {LIMIT:,} bytes: lower WIDTH")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="imgwarm-shot-") as folder:
        work = Path(folder)
        capture(work, work / "raw.png")
        shrink(work / "raw.png")


if __name__ == "__main__":
    main()
