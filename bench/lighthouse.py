"""Lighthouse on the gallery of the corpus's camera photos, as users audit a page (issue 27).

The photos are optimized into fresh stores, warmed into the tiers, written as a gallery
(`imgwarm gallery`) and served by `imgwarm serve` (nginx with the config imgwarm writes); then
npm's lighthouse (13) runs with Debian's Chromium, headless, in its mobile preset (a 412x823
phone at DPR 1.75 on simulated slow 4G) and its desktop preset, R times each, interleaved.
Each setup is one gallery, served at once: the defaults a new user gets against 0.3.0's
(issue 42), or the ladder by bytes. Medians (and the lowest) of the category scores and
the median LCP are reported, with the audits that scored below 1.

Needs Node.js and lighthouse installed with npm (the script says how when it is missing):

    npm install --prefix bench/node lighthouse@13
    .venv/bin/python bench/lighthouse.py                  # defaults against 0.3.0, 7 runs

The Markdown table is printed and, with the raw numbers, written to bench/results/lighthouse.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
IMGWARM = Path(sys.executable).with_name("imgwarm")
PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg", "xmp_test.jpg", "33-type_error.jpg",
          "DSCN0010.jpg", "canon_hdr_YES.jpg", "pyvips_sample.jpg"]
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")


def lighthouse_binary(prefix: Path) -> Path:
    found = prefix / "node_modules" / ".bin" / "lighthouse"
    if not found.exists():
        raise SystemExit(f"no lighthouse at {found}: npm install --prefix {prefix} "
                         "lighthouse@13")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def gallery(folder: Path, env: dict[str, str]) -> None:
    corpus = ROOT / "tests" / "corpus"
    for args in (["optimize", *(str(corpus / p) for p in PHOTOS)],
                 ["warm", "--allow-non-tmpfs"], ["gallery", "--out", str(folder / "g")]):
        subprocess.run([str(IMGWARM), *args], env=env, check=True, capture_output=True)


def audit(binary: Path, url: str, preset: str, out: Path, chromium: str) -> dict[str, Any]:
    args = [str(binary), url, f"--chrome-path={chromium}", "--output=json",
            f"--output-path={out}", "--quiet",
            "--chrome-flags=--headless=new --no-sandbox"]
    if preset == "desktop":
        args.append("--preset=desktop")
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    audits = report["audits"]
    breakdown = audits.get("lcp-breakdown-insight", {}).get("details", {})  # (LH 13)
    nodes = [{"node": item} for item in breakdown.get("items", [])
             if isinstance(item, dict) and item.get("type") == "node"]
    return {
        "scores": {c: report["categories"][c]["score"] for c in CATEGORIES},
        "lcp_ms": audits["largest-contentful-paint"]["numericValue"],
        "lcp_element": nodes[0]["node"].get("snippet", "")[:160] if nodes else None,
        "below": sorted(k for k, a in audits.items() if isinstance(a.get("score"), (int, float))
                        and a["score"] < 1 and a.get("scoreDisplayMode") != "informative"),
    }


# What each gallery's photos are made with: the defaults a new user gets, against 0.3.0's
# (four widths, every format at each) or a ladder by bytes
SETUPS: dict[str, dict[str, str]] = {
    "defaults": {},
    "0.3.0": {"IMGWARM_WIDTHS": "320,640,1280,1920", "IMGWARM_FALLBACK_WIDTHS": ""},
    "bytes-20K": {"IMGWARM_WIDTH_STEP_BYTES": "20K"},
    "phones-4": {"IMGWARM_WIDTHS": "320,640,810,1024,1290,1920"},  # bench/ladder.py's
}


def serve(folder: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen([str(IMGWARM), "serve", "--gallery", str(folder / "g"),
                               "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--node-prefix", type=Path, default=HERE / "node")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "lighthouse.json")
    parser.add_argument("--setups", default="defaults,0.3.0",
                        help=f"galleries to audit, interleaved: {', '.join(SETUPS)}")
    parser.add_argument("--formats", default=None,
                        help="the photos' formats in every setup (default: imgwarm's), e.g. "
                        "avif,webp,jpeg")
    args = parser.parse_args()
    chosen = [s for s in args.setups.split(",") if s]
    if not chosen or set(chosen) - set(SETUPS):
        parser.error(f"--setups: among {', '.join(SETUPS)}")
    binary = lighthouse_binary(args.node_prefix)
    work = Path(tempfile.mkdtemp(prefix="bench-lighthouse-"))
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        s: {"mobile": [], "desktop": []} for s in chosen}
    try:
        for setup in chosen:
            folder = work / setup
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")},
                   **{f"IMGWARM_{name.upper()}": str(folder / name) for name in
                      ("origin_root", "manifest_root", "nvme_root", "ram_root", "cache_state")},
                   **SETUPS[setup], **({"IMGWARM_FORMATS": args.formats} if args.formats
                                       else {})}
            gallery(folder, env)
            servers[setup] = serve(folder, env)
        for number in range(args.runs):
            for setup in chosen:
                for preset in ("mobile", "desktop"):
                    runs[setup][preset].append(audit(
                        binary, servers[setup][1], preset,
                        work / f"{setup}-{preset}-{number}.json", args.chromium))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(timeout=30)
        if not os.environ.get("KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    print(f"Lighthouse on the gallery of {len(PHOTOS)} corpus photos (formats "
          f"{args.formats or 'default'}), median of {args.runs} runs each (lowest in "
          f"brackets), interleaved; load average {os.getloadavg()[0]:.2f}\n")
    print("| photos made with | preset | " + " | ".join(CATEGORIES) +
          " | LCP | audits below 1 |")
    print("|---|---|" + "---:|" * (len(CATEGORIES) + 1) + "---|")
    summary: dict[str, dict[str, Any]] = {}
    for setup, presets in runs.items():
        for preset, found in presets.items():
            scores = {c: statistics.median(r["scores"][c] for r in found) for c in CATEGORIES}
            lowest = {c: min(r["scores"][c] for r in found) for c in CATEGORIES}
            lcp = statistics.median(r["lcp_ms"] for r in found)
            below = sorted({a for r in found for a in r["below"]})
            summary[f"{setup} {preset}"] = {"scores": scores, "lowest": lowest, "lcp_ms": lcp,
                                            "below": below}
            print(f"| {setup} | {preset} | " + " | ".join(
                f"{scores[c]:.2f} ({lowest[c]:.2f})" for c in CATEGORIES) +
                f" | {lcp / 1000:.2f} s | {', '.join(below) or '-'} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
