"""Lighthouse on the gallery of the corpus's camera photos, as users audit a page (issue 27).

The photos are optimized into fresh stores, warmed into the tiers, written as a gallery
(`imgwarm gallery`) and served by `imgwarm serve` (nginx with the config imgwarm writes); then
npm's lighthouse (13) runs with Debian's Chromium, headless, in its mobile preset (a 412x823
phone at DPR 1.75 on simulated slow 4G) and its desktop preset, R times each, interleaved.
Medians of the category scores and of LCP are reported, with the audits that scored below 1.

Needs Node.js and lighthouse installed with npm (the script says how when it is missing):

    npm install --prefix bench/node lighthouse@13
    .venv/bin/python bench/lighthouse.py --runs 3

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--node-prefix", type=Path, default=HERE / "node")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "lighthouse.json")
    parser.add_argument("--step", default="20K",
                        help="width_step_bytes of the photos (default 20K; 0: the fixed widths)")
    parser.add_argument("--formats", default=None,
                        help="the photos' formats (default: imgwarm's, webp and jpeg), e.g. "
                        "avif,webp,jpeg")
    args = parser.parse_args()
    binary = lighthouse_binary(args.node_prefix)
    folder = Path(tempfile.mkdtemp(prefix="bench-lighthouse-"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")},
           **{f"IMGWARM_{name.upper()}": str(folder / name) for name in
              ("origin_root", "manifest_root", "nvme_root", "ram_root", "cache_state")},
           "IMGWARM_WIDTH_STEP_BYTES": args.step,
           **({"IMGWARM_FORMATS": args.formats} if args.formats else {})}
    port = free_port()
    server = None
    try:
        gallery(folder, env)
        server = subprocess.Popen([str(IMGWARM), "serve", "--gallery", str(folder / "g"),
                                   "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        runs: dict[str, list[dict[str, Any]]] = {"mobile": [], "desktop": []}
        for number in range(args.runs):
            for preset in runs:
                runs[preset].append(audit(binary, url, preset,
                                          folder / f"{preset}-{number}.json", args.chromium))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if not os.environ.get("KEEP"):
            shutil.rmtree(folder, ignore_errors=True)
    print(f"Lighthouse on the gallery of {len(PHOTOS)} corpus photos (width_step_bytes="
          f"{args.step}, formats {args.formats or 'default'}), median of {args.runs} runs "
          "each; load average "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| preset | " + " | ".join(CATEGORIES) + " | LCP | audits below 1 |")
    print("|---|" + "---:|" * (len(CATEGORIES) + 1) + "---|")
    summary = {}
    for preset, found in runs.items():
        scores = {c: statistics.median(r["scores"][c] for r in found) for c in CATEGORIES}
        lcp = statistics.median(r["lcp_ms"] for r in found)
        below = sorted({a for r in found for a in r["below"]})
        summary[preset] = {"scores": scores, "lcp_ms": lcp, "below": below}
        print(f"| {preset} | " + " | ".join(f"{scores[c]:.2f}" for c in CATEGORIES) +
              f" | {lcp / 1000:.1f} s | {', '.join(below) or '-'} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
