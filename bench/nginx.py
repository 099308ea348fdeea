"""Benchmark the emitted nginx config with wrk: what the tier chain costs, what RAM is worth.

    chain  one hot thumbnail (a RAM tier hit) through the config `imgwarm nginx` writes,
           against a plain ``root`` config serving the same file from the same folder, with
           the same speed directives (sendfile, open_file_cache, reuseport, an access log) and
           without them (nginx's defaults). Runs interleaved; requests/s, the median of RUNS.
    instructions
           the same hot thumbnail, nginx run under valgrind's callgrind (one process, no
           master): the instructions nginx itself executes a request, the imgwarm config
           (with and without ``pcre_jit on``) against the plain ``root`` one, and the share
           of the worker's CPU time that is its own (not the kernel's): a cost that requests/s
           on a busy virtual machine cannot show within 5% (from run to run the same plain
           config moved by 10%).
    tiers  FILES small files (5-30 KB, three widths a source) placed by `imgwarm warm`, each
           request for a random one of them (wrk with a Lua script), the page cache dropped
           before each run (echo 3 > /proc/sys/vm/drop_caches, as root): served through the
           emitted config from the NVMe tier (the RAM tier empty) against from the RAM tier;
           requests/s and latency percentiles (p50, p99), a fresh nginx each run.

Both nginx and wrk run on this machine: nginx with one worker pinned to one core, wrk with one
thread pinned to another; nginx.conf has ``pcre_jit on`` (docs/nginx.md asks for it: imgwarm's
image location is a regular expression). Usage (root; a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/nginx.py                        # both parts
    .venv/bin/python bench/nginx.py --parts tiers --files 100000 --seconds 10

The Markdown table is printed and, with the raw numbers, written to bench/results/nginx.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    HERE,
    IMGWARM,
    env_for,
    mount,
    quiet_caches,
    run_parts,
    settings_for,
    timed,
    unmount,
)

from imgwarm.config import Settings
from imgwarm.serve.nginx import OPEN_FILES
from tests.support.servers import free_port
from tests.support.sites import Site, synthetic

# nginx on one core, wrk on the other: neither moves, so runs repeat (unpinned, one config's
# requests/s moved by 10% from run to run)
PIN_NGINX, PIN_WRK = (["taskset", "-c", "0"], ["taskset", "-c", "1"]) \
    if (os.cpu_count() or 1) >= 2 else ([], [])
Config = Callable[[int], str]  # the http {} part of an nginx config, for a port
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SPEED = f"""    sendfile on;
    tcp_nopush on;
    open_file_cache max={OPEN_FILES} inactive=120s;
    open_file_cache_valid 30s;
    open_file_cache_errors on;
"""
RANDOM_PATHS = """-- A random one of the paths in {paths} on each request.
local paths = {{}}
for line in io.lines("{paths}") do paths[#paths + 1] = line end
math.randomseed({seed})
request = function()
    return wrk.format("GET", paths[math.random(#paths)])
end
"""


@dataclass(frozen=True)
class Nginx:
    port: int
    worker: int  # the worker process's pid: its CPU time is what a request costs

    def cpu_seconds(self) -> float:
        return sum(_ticks(self.worker)) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def nginx(folder: Path, config: Config) -> Iterator[Nginx]:
    """A fresh nginx (one worker) whose http {} holds ``config`` for a free port."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    port = free_port()
    (folder / "nginx.conf").write_text(
        f"user root;\nworker_processes 1;\npcre_jit on;\npid {folder}/nginx.pid;\n"
        f"error_log {folder}/error.log;\nevents {{ worker_connections 4096; }}\n"
        f"http {{\ninclude /etc/nginx/mime.types;\n{config(port)}\n}}\n")
    server = subprocess.Popen([*PIN_NGINX, NGINX, "-p", str(folder), "-c",
                               str(folder / "nginx.conf"), "-g", "daemon off;"])
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/.none", timeout=1)
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.05)
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        yield Nginx(port, int(children[0]))
    finally:
        server.terminate()
        server.wait(timeout=10)


def wrk(server: Nginx, path: str, seconds: int, connections: int,
        script: Path | None = None) -> dict[str, float]:
    """One wrk run: requests/s, the p50 and p99 latencies in ms and the nginx worker's CPU time
    a request (µs: steady where requests/s moves with the neighbours); non-2xx refused."""
    command = [*PIN_WRK, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
               "--timeout", "10s"]
    if script is not None:
        command += ["-s", str(script)]
    cpu = server.cpu_seconds()
    _, out = timed([*command, f"http://127.0.0.1:{server.port}{path}"])
    cpu = server.cpu_seconds() - cpu
    if "Non-2xx" in out or "Socket errors" in out:  # every request must be a whole 200
        raise SystemExit(f"wrk saw errors:\n{out}")
    percentiles = {p: _ms(v, unit) for p, v, unit in
                   re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)$", out, re.MULTILINE)}
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
            "p50_ms": percentiles["50"], "p99_ms": percentiles["99"],
            "cpu_us": cpu * 1e6 / requests}


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def emitted(settings: Settings, access_log: Path) -> Config:
    """The config `imgwarm nginx` writes for these settings."""
    def config(port: int) -> str:
        return timed([str(IMGWARM), "nginx", "--listen", f"127.0.0.1:{port}",
                      "--access-log", str(access_log)], env_for(settings))[1]
    return config


def plain(root: Path, access_log: Path, speed: bool) -> Config:
    def config(port: int) -> str:
        listen = f"127.0.0.1:{port}" + (" reuseport" if speed else "")
        return (f"server {{\n    listen {listen};\n    root {root};\n"
                f"    access_log {access_log};\n{SPEED if speed else ''}}}\n")
    return config


def _site(work: Path, ram: Path, files: int) -> tuple[Site, list[str]]:
    """An origin of ``files`` variants, all placed in both tiers by `imgwarm warm`."""
    settings = settings_for(work, ram, ram_budget="100%", ram_max_width=16383)
    site = Site(settings, work, work / "sources")
    synthetic(site, -(-files // 3), 3, sizes=(5000, 30000))
    timed([str(IMGWARM), "warm", "--json"], env_for(settings))
    paths = sorted(str(p.relative_to(settings.cache.ram_root)) for p in
                   settings.cache.ram_root.rglob("*.webp"))
    return site, paths


def bench_chain(work: Path, runs: int, seconds: int, connections: int) -> dict[str, Any]:
    ram = work / "ram"
    mount(ram, "256m")
    try:
        site, paths = _site(work / "chain", ram, 300)
        hot = "/" + min(paths, key=lambda p: (site.settings.cache.ram_root / p).stat().st_size)
        configs = {
            "imgwarm": emitted(site.settings, work / "imgwarm.log"),
            "plain root, same directives": plain(site.settings.cache.ram_root,
                                                 work / "plain.log", speed=True),
            "plain root, nginx defaults": plain(site.settings.cache.ram_root,
                                                work / "defaults.log", speed=False),
        }
        found: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
        for run in range(runs):
            names = list(configs) if run % 2 == 0 else list(reversed(configs))
            for name in names:
                with nginx(work / "nginx", configs[name]) as server:
                    wrk(server, hot, 1, connections)  # warm up: open_file_cache, connections
                    found[name].append(wrk(server, hot, seconds, connections))
        median = _medians(found)
        same, defaults = median["plain root, same directives"], median["plain root, nginx defaults"]
        return {"file_bytes": (site.settings.cache.ram_root / hot[1:]).stat().st_size,
                "median": median, "raw": found,
                "imgwarm_over_plain": median["imgwarm"]["rps"] / same["rps"],
                "imgwarm_over_defaults": median["imgwarm"]["rps"] / defaults["rps"],
                "cpu_imgwarm_over_plain": median["imgwarm"]["cpu_us"] / same["cpu_us"],
                "cpu_imgwarm_over_defaults": median["imgwarm"]["cpu_us"] / defaults["cpu_us"]}
    finally:
        unmount(ram)


def instructions(folder: Path, config: Config, path: str, jit: bool) -> float:
    """Instructions nginx executes a request for ``path`` (callgrind, counted over a wrk run
    after a first request)."""
    folder.mkdir(parents=True)
    port = free_port()
    text = config(port).replace(" reuseport", "")  # one process: nothing to spread over
    (folder / "nginx.conf").write_text(
        f"{'pcre_jit on;' if jit else ''}\nuser root;\nmaster_process off;\ndaemon off;\n"
        f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\nevents {{}}\n"
        f"http {{\ninclude /etc/nginx/mime.types;\n{text}\n}}\n")
    out = folder / "callgrind.out"
    server = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf")],
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        subprocess.run(["callgrind_control", "--zero", str(server.pid)], check=True,
                       capture_output=True)
        _, out_text = timed(["wrk", "-t1", "-c4", "-d8s", f"http://127.0.0.1:{port}{path}"])
        subprocess.run(["callgrind_control", "--dump", str(server.pid)], check=True,
                       capture_output=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
    if "Non-2xx" in out_text:
        raise SystemExit(f"wrk saw errors under callgrind:\n{out_text}")
    requests = int(re.search(r"(\d+) requests in", out_text).group(1))  # type: ignore[union-attr]
    dump = sorted(folder.glob("callgrind.out.*"))[0].read_text()
    total = int(re.search(r"^(?:summary|totals): (\d+)", dump, re.MULTILINE).group(1))  # type: ignore[union-attr]
    return total / requests


def bench_instructions(work: Path, connections: int) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise SystemExit("the instructions part needs valgrind (apt-get install valgrind)")
    ram = work / "ram"
    mount(ram, "64m")
    try:
        site, paths = _site(work / "instructions", ram, 30)
        hot = "/" + paths[0]
        mine = emitted(site.settings, work / "imgwarm.log")
        found = {"plain": instructions(work / "cg-plain", plain(site.settings.cache.ram_root,
                                       work / "plain.log", speed=True), hot, jit=False),
                 "imgwarm": instructions(work / "cg-imgwarm", mine, hot, jit=False),
                 "imgwarm, pcre_jit": instructions(work / "cg-jit", mine, hot, jit=True)}
        with nginx(work / "nginx", mine) as server:  # how much of a request is nginx's own
            wrk(server, hot, 1, connections)
            before = _ticks(server.worker)
            wrk(server, hot, 5, connections)
            user, system = (b - a for a, b in zip(before, _ticks(server.worker), strict=True))
        share = user / (user + system)
        return {"instructions": found, "user_share": share,
                "imgwarm_over_plain": found["imgwarm"] / found["plain"],
                "jit_over_plain": found["imgwarm, pcre_jit"] / found["plain"],
                "cpu_cost": share * (found["imgwarm"] / found["plain"] - 1),
                "cpu_cost_jit": share * (found["imgwarm, pcre_jit"] / found["plain"] - 1)}
    finally:
        unmount(ram)


def _ticks(pid: int) -> tuple[int, int]:
    """A process's user and system CPU time, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def bench_tiers(work: Path, files: int, runs: int, seconds: int,
                connections: int) -> dict[str, Any]:
    ram = work / "ram"
    mount(ram, "4g")
    empty = work / "empty-ram"
    mount(empty, "16m")
    try:
        site, paths = _site(work / "tiers", ram, files)
        paths_file = work / "paths.txt"
        paths_file.write_text("".join(f"/{p}\n" for p in paths))
        configs = {
            "ram": emitted(site.settings, work / "ram.log"),
            "nvme": emitted(site.settings.updated(ram_root=empty / "tier"), work / "nvme.log"),
        }
        found: dict[str, list[dict[str, float]]] = {"ram": [], "nvme": []}
        for run in range(runs):
            script = work / f"random-{run}.lua"
            script.write_text(RANDOM_PATHS.format(paths=paths_file, seed=run + 1))
            for name in (["nvme", "ram"] if run % 2 == 0 else ["ram", "nvme"]):
                with nginx(work / "nginx", configs[name]) as server:
                    quiet_caches()
                    found[name].append(wrk(server, "/", seconds, connections, script))
        median = _medians(found)
        total = sum((site.settings.cache.nvme_root / p).stat().st_size for p in paths)
        return {"files": len(paths), "bytes": total, "median": median, "raw": found,
                "drop_caches": os.geteuid() == 0,
                "ram_over_nvme_rps": median["ram"]["rps"] / median["nvme"]["rps"],
                "nvme_over_ram_p50": median["nvme"]["p50_ms"] / median["ram"]["p50_ms"],
                "nvme_over_ram_p99": median["nvme"]["p99_ms"] / median["ram"]["p99_ms"]}
    finally:
        unmount(ram)
        unmount(empty)


def _medians(found: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            for name, rows in found.items()}


def _table(results: dict[str, Any]) -> str:
    rows = ["| measure | result |", "|---|---|"]
    chain = results.get("chain")
    if chain:
        median = chain["median"]
        rows += [
            f"| hot thumbnail ({chain['file_bytes']:,} B, RAM tier hit): imgwarm config / "
            f"plain root with the same directives: requests/s; nginx CPU a request | "
            f"{chain['imgwarm_over_plain']:.3f}; {chain['cpu_imgwarm_over_plain']:.3f} |",
            f"| same, imgwarm config / plain root with nginx's defaults | "
            f"{chain['imgwarm_over_defaults']:.3f}; {chain['cpu_imgwarm_over_defaults']:.3f} |",
            "| requests/s and µs of nginx CPU a request (imgwarm; plain, same directives; "
            "plain, defaults) | " + "; ".join(f"{v['rps']:,.0f} / {v['cpu_us']:.1f} µs"
                                              for v in median.values()) + " |",
        ]
    counted = results.get("instructions")
    if counted:
        found = counted["instructions"]
        rows += [
            f"| instructions nginx executes a request (callgrind): imgwarm / plain root; with "
            f"pcre_jit on | {counted['imgwarm_over_plain']:.3f}; "
            f"{counted['jit_over_plain']:.3f} |",
            f"| nginx's own share of its CPU time (the rest is the kernel's) | "
            f"{counted['user_share']:.2f} |",
            f"| so the chain's cost in nginx CPU a request; with pcre_jit on | "
            f"{counted['cpu_cost']:.1%}; {counted['cpu_cost_jit']:.1%} |",
            "| instructions a request (plain; imgwarm; imgwarm with pcre_jit) | "
            + "; ".join(f"{v:,.0f}" for v in found.values()) + " |",
        ]
    tiers = results.get("tiers")
    if tiers:
        ram, nvme = tiers["median"]["ram"], tiers["median"]["nvme"]
        rows += [
            f"| {tiers['files']:,} files ({tiers['bytes'] / 2**20:,.0f} MiB), random requests, "
            f"page cache dropped: RAM tier / NVMe tier requests/s | "
            f"{tiers['ram_over_nvme_rps']:.2f} |",
            f"| same, NVMe / RAM latency p50; p99 | {tiers['nvme_over_ram_p50']:.2f}; "
            f"{tiers['nvme_over_ram_p99']:.2f} |",
            f"| requests/s, p50, p99 (RAM; NVMe) | {ram['rps']:,.0f}, {ram['p50_ms']:.2f} ms, "
            f"{ram['p99_ms']:.2f} ms; {nvme['rps']:,.0f}, {nvme['p50_ms']:.2f} ms, "
            f"{nvme['p99_ms']:.2f} ms |",
        ]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="chain,instructions,tiers")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "nginx.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/nginx.py mounts tmpfs and drops caches: run it as root")
    if shutil.which("wrk") is None:
        raise SystemExit("bench/nginx.py needs wrk (apt-get install wrk)")
    run_parts("nginx", args.parts, {
        "chain": lambda work: bench_chain(work, args.runs, args.seconds, args.connections),
        "instructions": lambda work: bench_instructions(work, args.connections),
        "tiers": lambda work: bench_tiers(work, args.files, args.runs, args.seconds,
                                          args.connections),
    }, _table, args.output)

if __name__ == "__main__":
    main()
