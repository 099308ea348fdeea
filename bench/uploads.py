"""Upload to NVMe: how long after an original is PUT to the bucket nginx answers every one of
its variants from the NVMe tier of every cache box, by events against polling warm.

One stack a run, every part real and on this machine: moto's server (S3, and SQS with the
bucket's notification of created originals), a redis-server, one `imgwarm worker` (2 pool
processes), and two cache boxes, each an nginx with the config `imgwarm nginx --tier-header`
writes over its own tiers and a `warm` of its own. The way a box learns of new variants is
what is compared:

    follow      `imgwarm listen --sqs QUEUE` queues each upload's job as its event arrives;
                `imgwarm warm --follow` on each box reads the events stream
    every=10s   `imgwarm listen` as above (the job starts at once); `warm --every 10s`
    every=5m    the same with `warm --every 5m` (today's compose default)

Photos are distinct 12 MP JPEGs (corpus photos scaled to 4000x3000, each with a mark of its
own, so that no job is skipped as already made), made before the clock starts and PUT at a
set rate. A poller learns each upload's variant paths from its `published` event and asks
both nginx for each (HEAD) every 20 ms until the answer is 200 with `X-Cache-Tier: nvme`
(or `ram`); the delay is from the PUT's answer to the last variant's.

Usage (a quiet machine: nothing else running):
    .venv/bin/python bench/uploads.py                        # follow and every=10s at 1/s
    .venv/bin/python bench/uploads.py --modes follow,every=10s,every=5m --rates 0.5,1,2

The Markdown table is printed and, with every delay, written to bench/results/uploads.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from tests.support.servers import (  # noqa: E402  (the tests' real servers)
    AWS,
    IMGWARM,
    RedisServer,
    Worker,
    clean_env,
    free_port,
    wait_for,
)

DEFAULT_OUTPUT = HERE / "results" / "uploads.json"
CORPUS = ROOT / "tests" / "corpus"
SEEDS = ["DSCN0010.jpg", "Landscape_1.jpg", "cat.jpg", "concert.jpg", "Pentax_K10D.jpg"]
POLL = 0.02  # seconds between a variant's HEAD requests
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def make_photos(folder: Path, count: int) -> list[Path]:
    """``count`` distinct 12 MP JPEGs (4000x3000, quality 90)."""
    import pyvips

    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(count):
        seed = pyvips.Image.new_from_file(str(CORPUS / SEEDS[i % len(SEEDS)]), access="random")
        scaled = seed.resize(4000 / seed.width, vscale=3000 / seed.height)
        marked = scaled.copy_memory()
        marked.draw_rect([(i * 37) % 256, (i * 91) % 256, (i * 53) % 256][:scaled.bands],
                         40 + (i % 50) * 60, 40, 48, 48, fill=True)
        path = folder / f"photo-{i:04d}.jpg"
        marked.write_to_file(str(path), Q=90)
        made.append(path)
    return made


@dataclass
class Box:
    """A cache box: its tiers and state, its nginx, its warm."""

    name: str
    root: Path
    port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "IMGWARM_NVME_ROOT": str(self.root / "nvme"),
                "IMGWARM_RAM_ROOT": str(self.root / "ram"),
                "IMGWARM_RAM_ALLOW_NON_TMPFS": "true",
                "IMGWARM_CACHE_STATE": str(self.root / "state"),
                "IMGWARM_ACCESS_LOGS": str(self.root / "nginx" / "access.log")}

    def start_nginx(self, base: dict[str, str]) -> None:
        folder = self.root / "nginx"
        folder.mkdir(parents=True)
        for tier in ("nvme", "ram", "state"):
            (self.root / tier).mkdir(mode=0o755)
        subprocess.run([str(IMGWARM), "nginx", "--tier-header", "--listen",
                        f"127.0.0.1:{self.port}", "--access-log", str(folder / "access.log"),
                        "--out", str(folder / "imgwarm.conf")],
                       env=self.env(base), check=True, capture_output=True)
        user = "user root;\n" if os.geteuid() == 0 else ""
        (folder / "nginx.conf").write_text(
            f"{user}worker_processes 1;\npid {folder}/nginx.pid;\n"
            f"error_log {folder}/error.log;\nevents {{}}\n"
            f"http {{ include /etc/nginx/mime.types; include {folder}/imgwarm.conf; }}\n")
        self.processes.append(subprocess.Popen(
            [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g", "daemon off;"]))
        wait_for(lambda: _listening(self.port), f"nginx of {self.name}")

    def start_warm(self, base: dict[str, str], mode: str) -> None:
        args = ["warm", "--follow"] if mode == "follow" else ["warm", "--every",
                                                              mode.split("=", 1)[1]]
        log = (self.root / "warm.log").open("ab")
        self.processes.append(subprocess.Popen([str(IMGWARM), *args], env=self.env(base),
                                               stdout=log, stderr=subprocess.STDOUT))

    def tier(self, path: str) -> str | None:
        """The tier nginx answered a HEAD of ``path`` from; None when not 200."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return str(answer.headers.get("X-Cache-Tier", "")) if answer.status == 200 \
                    else None
        except (urllib.error.URLError, OSError):
            return None

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


class Poller:
    """Learns variant paths from the events stream; times each upload until every box
    answers every variant from NVMe (or RAM)."""

    def __init__(self, redis_url: str, boxes: list[Box]) -> None:
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.boxes = boxes
        self.put_at: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        last = "$"
        while not self.stop.is_set():
            found = self.client.xread({"imgwarm:events": last}, block=500, count=100)
            for _, entries in found or []:
                for entry_id, fields in entries:
                    last = entry_id
                    event = json.loads(fields[b"event"])
                    if os.environ.get("BENCH_DEBUG"):
                        print(f"{time.strftime('%H:%M:%S')} EVENT {event['key']}", flush=True)
                    if event["type"] == "published" and event["key"] in self.put_at:
                        paths = ["/" + v["path"] for v in event["variants"]]
                        thread = threading.Thread(target=self._wait, daemon=True,
                                                  args=(event["key"], paths))
                        thread.start()
                        self.threads.append(thread)

    def _wait(self, key: str, paths: list[str]) -> None:
        left = [(box, path) for box in self.boxes for path in paths]
        while left and not self.stop.is_set():
            left = [(box, path) for box, path in left if box.tier(path) not in ("nvme", "ram")]
            if left:
                time.sleep(POLL)
        if not left:
            self.done[key] = time.monotonic()
            if os.environ.get("BENCH_DEBUG"):
                print(f"{time.strftime('%H:%M:%S')} DONE {key}", flush=True)

    def delays(self) -> dict[str, float]:
        return {key: self.done[key] - self.put_at[key] for key in self.done}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_one(work: Path, photos: list[Path], mode: str, rate: float,
            timeout: float) -> dict[str, Any]:
    import boto3

    redis_server = RedisServer(work)
    moto_port = free_port()
    moto = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H",
                             "127.0.0.1", "-p", str(moto_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{moto_port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **{
        k.lower(): v for k, v in AWS.items() if k != "AWS_DEFAULT_REGION"})
    wait_for(lambda: _answers(s3), "moto's server", timeout=30)
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    base = clean_env(
        IMGWARM_ORIGIN="s3", IMGWARM_S3_BUCKET=bucket, IMGWARM_S3_ENDPOINT_URL=endpoint,
        IMGWARM_S3_REGION="us-east-1", IMGWARM_BROKER_URL=redis_server.url,
        IMGWARM_RESULT_BACKEND=redis_server.url, IMGWARM_ORIGINALS_PREFIX="uploads/")
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", **{
        k.lower(): v for k, v in AWS.items() if k != "AWS_DEFAULT_REGION"})
    queue = sqs.create_queue(QueueName=f"{bucket}-uploads")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    subprocess.run([str(IMGWARM), "bucket", "--create", "--notify", arn], env=base,
                   check=True, capture_output=True)
    boxes = [Box(f"box{i}", work / f"box{i}") for i in (1, 2)]
    worker = None
    listener = None
    try:
        for box in boxes:
            box.start_nginx(base)
        worker = Worker(base, work / "worker.log", "--concurrency", "2")
        listener = subprocess.Popen([str(IMGWARM), "listen", "--sqs", queue], env=base,
                                    stdout=(work / "listen.log").open("ab"),
                                    stderr=subprocess.STDOUT)
        for box in boxes:
            box.start_warm(base, mode)
        time.sleep(3)  # every process up and idle: the first (empty) warm runs are done
        poller = Poller(redis_server.url, boxes)
        started = time.monotonic()
        for i, photo in enumerate(photos):
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            key = f"uploads/{mode.replace('=', '-')}/{photo.name}"
            s3.put_object(Bucket=bucket, Key=key, Body=photo.read_bytes(),
                          ContentType="image/jpeg")
            poller.put_at[key] = time.monotonic()
            if os.environ.get("BENCH_DEBUG"):
                print(f"{time.strftime('%H:%M:%S')} PUT {key}", flush=True)
        deadline = time.monotonic() + timeout
        while len(poller.done) < len(photos) and time.monotonic() < deadline:
            time.sleep(0.2)
        poller.stop.set()
        delays = sorted(poller.delays().values())
        return {"mode": mode, "rate": rate, "uploads": len(photos), "arrived": len(delays),
                "p50": percentile(delays, 0.5) if delays else None,
                "p99": percentile(delays, 0.99) if delays else None,
                "max": max(delays) if delays else None,
                "mean": statistics.fmean(delays) if delays else None, "delays": delays}
    finally:
        if listener is not None:
            listener.terminate()
            listener.wait(30)
        for box in boxes:
            box.stop()
        if worker is not None:
            worker.stop()
        moto.terminate()
        moto.wait(30)
        redis_server.stop()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _answers(s3: Any) -> bool:
    try:
        s3.list_buckets()
        return True
    except Exception:
        return False


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| how boxes learn | uploads/s | arrived | p50 | p99 | max |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        def s(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f} s"
        lines.append(f"| {r['mode']} | {r['rate']:g} | {r['arrived']}/{r['uploads']} | "
                     f"{s(r['p50'])} | {s(r['p99'])} | {s(r['max'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="follow,every=10s",
                        help="follow, every=DURATION (comma-separated)")
    parser.add_argument("--rates", default="1", help="uploads a second (comma-separated)")
    parser.add_argument("--uploads", type=int, default=40, help="uploads a run")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds after the last PUT to wait for the rest (more for 5m)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--keep", action="store_true", help="keep the logs (printed path)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="imgwarm-bench-uploads-", dir="/var/tmp"))
    results = []
    try:
        photos = make_photos(work / "photos", args.uploads)
        for mode in args.modes.split(","):
            for rate in (float(r) for r in args.rates.split(",")):
                run = work / f"run-{mode.replace('=', '-')}-{rate:g}"
                run.mkdir()
                timeout = max(args.timeout, 330.0) if mode.endswith("m") else args.timeout
                found = run_one(run, photos, mode, rate, timeout)
                print(table([found]).splitlines()[-1], flush=True)
                results.append(found)
    finally:
        if args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
