"""Start-up time of commands that need no image work, against an earlier commit, in one run.

Each command runs in a fresh interpreter, as a user runs it, R times, the two trees
interleaved (new, old, old, new, ...) so that machine noise falls on both; medians and ratios
are printed. The earlier tree is checked out with ``git worktree`` and run from its own
folder through PYTHONPATH, with this checkout's virtual environment (same dependencies).

Usage:
    .venv/bin/python bench/startup.py                   # against c6366ac, 10 runs each
    .venv/bin/python bench/startup.py --base 1a869d4 --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COMMANDS = [["--help"], ["status", "--help"], ["config"]]
RUNNER = "import sys; sys.argv[0] = 'imgwarm'; from imgwarm.cli import main; main()"


def timed(tree: Path, args: list[str], cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env["PYTHONPATH"] = str(tree)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUNNER, *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="c6366ac", help="the earlier commit")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        old = Path(work) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old),
                        args.base], check=True, capture_output=True)
        try:
            cwd = Path(work)  # not a checkout: '' on sys.path finds neither tree
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(2):  # warm the file cache and .pyc files of both trees
                for command in COMMANDS:
                    timed(REPO, command, cwd)
                    timed(old, command, cwd)
            for run in range(args.runs):
                order = [("new", REPO), ("old", old)] if run % 2 == 0 else [("old", old),
                                                                            ("new", REPO)]
                for command in COMMANDS:
                    for label, tree in order:
                        key = (label, " ".join(command))
                        times.setdefault(key, []).append(timed(tree, command, cwd))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)],
                           check=False, capture_output=True)
    print(f"median of {args.runs} interleaved runs, against {args.base}\n")
    print("| command | before (s) | now (s) | now / before |\n|---|---:|---:|---:|")
    results = {}
    for command in COMMANDS:
        name = " ".join(command)
        before = statistics.median(times[("old", name)])
        now = statistics.median(times[("new", name)])
        results[name] = {"before": before, "now": now, "ratio": now / before}
        print(f"| imgwarm {name} | {before:.3f} | {now:.3f} | {now / before:.2f} |")
    out = HERE / "results" / "startup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"base": args.base, "runs": args.runs, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
