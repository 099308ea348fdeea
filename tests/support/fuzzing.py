"""A deterministic mutation fuzzer for ``imgwarm optimize``, and the invariants it checks.

Each case is one seed with one mutation, as an attacker would make it; the seeds, mutations
and strict decoder of each source format are in fuzz_formats.py (JPEG: fuzz_jpeg.py), the
gain-map cases in fuzz_gainmap.py. All cases and seeds of a format go through one real
``imgwarm optimize --json`` run; then, for every case:

- the run exits 0 or 1, with one JSON line per input and nothing else on stdout, and no
  internal error or decoder crash;
- nothing is left behind: every file in the origin is a variant of an accepted case or seed,
  no temporary file, one manifest per accepted source;
- every output decodes, matches the hash in its name, its size and its recorded dimensions;
- a case that the format's strict decoder refuses but imgwarm accepts is compared with its
  clean seed's output, 8x8 block by block: none may differ visibly (a damaged picture must
  never be published);
- a case that the strict decoder accepts is never refused as corrupt (a picture that
  decodes strictly is never refused), and every seed of a format this build decodes is made
  (in the same workers as the cases: a hostile file must not spoil the next ones).

With ``memory=True`` the run's processes are sampled: the peak of their anonymous memory,
together, is what the ``max_memory`` setting bounds.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from imgwarm.store.changes import FOLDER as JOURNAL
from imgwarm.store.format import FORMAT_RECORD, FormatRecord
from imgwarm.store.references import DROPPED, REFS
from tests.support.fuzz_bytes import Mutation
from tests.support.fuzz_formats import FORMATS, strict_decodes
from tests.support.fuzz_jpeg import (
    FRAMES,
    MUTATIONS,
    corpus_seeds,
    lossless_jpeg,
    synthetic_seeds,
)
from tests.support.measure import _anon, _tree

__all__ = ["FRAMES", "MUTATIONS", "Case", "Report", "check", "corpus_seeds", "lossless_jpeg",
           "make_cases", "synthetic_seeds"]

VISIBLE = 6.0  # mean absolute difference of an 8x8 block (0..255) that anyone would see


@dataclass(frozen=True)
class Case:
    name: str  # the file name, without its suffix: number, mutation and seed
    seed: str
    kind: str
    data: bytes
    format: str = "jpeg"

    @property
    def file(self) -> str:
        return self.name + FORMATS[self.format].suffix


def make_cases(seeds: dict[str, bytes], count: int, *, seed: int = 7,
               mutations: dict[str, Mutation] | None = None, format: str = "jpeg",
               prefix: str = "") -> list[Case]:
    """``count`` cases, the same every time for the same seeds: mutations and seeds in turn,
    so that every mutation meets every kind of seed (JPEG's mutations unless others given)."""
    table = MUTATIONS if mutations is None else mutations
    rng = random.Random(seed)
    names, kinds = sorted(seeds), sorted(table)
    cases: list[Case] = []
    attempt = 0
    while len(cases) < count and attempt < 50 * count + 100:
        kind = kinds[attempt % len(kinds)]
        source = names[(attempt // len(kinds)) % len(names)]
        attempt += 1
        mutated = table[kind](rng, seeds[source])
        if mutated is None or mutated == seeds[source]:
            continue
        cases.append(Case(f"{prefix}{len(cases):05d}-{kind}-{source}", source, kind, mutated,
                          format))
    return cases


def format_cases(format_name: str, count: int, *, seed: int = 7) -> list[Case]:
    """``count`` cases of one source format of the table."""
    fmt = FORMATS[format_name]
    return make_cases(fmt.seeds(), count, seed=seed, mutations=fmt.mutations,
                      format=format_name, prefix="" if format_name == "jpeg" else
                      f"{format_name}-")


@dataclass
class Report:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    strict_refused_accepted: int = 0  # compared block by block with the seed's output
    exit_code: int = 0
    internal_errors: int = 0
    peak_memory: int = 0  # bytes: all the run's processes together (with memory=True)
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)
    classes: Counter[str] = field(default_factory=Counter)  # of findings
    examples: dict[str, str] = field(default_factory=dict)  # one finding of each class
    reasons: Counter[str] = field(default_factory=Counter)
    accepted_by_kind: Counter[str] = field(default_factory=Counter)
    refused_by_kind: Counter[str] = field(default_factory=Counter)
    compared_by_kind: Counter[str] = field(default_factory=Counter)
    findings_by_kind: Counter[str] = field(default_factory=Counter)
    errors_by_kind: Counter[str] = field(default_factory=Counter)  # internal errors, crashes

    def find(self, kind: str, text: str, case: Case | None = None) -> None:
        """One finding of class ``kind`` (about ``case``, when it is one case's)."""
        self.findings.append(text)
        self.classes[kind] += 1
        self.examples.setdefault(kind, text[:300])
        if case is not None:
            self.findings_by_kind[case.kind] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases, "accepted": self.accepted, "refused": self.refused,
            "strict_refused_but_accepted": self.strict_refused_accepted,
            "findings": len(self.findings), "exit_code": self.exit_code,
            "internal_errors": self.internal_errors,
            "peak_memory_mib": round(self.peak_memory / (1 << 20)),
            "seconds": round(self.seconds, 1),
            "finding_classes": dict(sorted(self.classes.items())),
            "finding_examples": dict(sorted(self.examples.items())),
            "accepted_by_kind": dict(sorted(self.accepted_by_kind.items())),
            "refused_by_kind": dict(sorted(self.refused_by_kind.items())),
            "compared_by_kind": dict(sorted(self.compared_by_kind.items())),
            "findings_by_kind": dict(sorted(self.findings_by_kind.items())),
            "errors_by_kind": dict(sorted(self.errors_by_kind.items())),
        }


def _reason_class(error: str) -> str:
    text = error.split(": ", 1)[-1]
    for word in ("truncated", "corrupt", "max_pixels", "max_memory", "unsupported",
                 "not a recognised", "cannot read", "too narrow", "bad dimensions"):
        if word in text:
            return word
    return text[:60]


def run_imgwarm(workdir: Path, *folders: Path, widths: str | None = None, workers: int = 2,
                settings: dict[str, str] | None = None,
                memory: bool = False) -> tuple[subprocess.CompletedProcess[str], int]:
    """One ``imgwarm optimize --json`` run (``settings`` as IMGWARM_* variables), and the peak
    of the anonymous memory of all its processes together when ``memory`` (else 0)."""
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env |= {f"IMGWARM_{k.upper()}": v for k, v in (settings or {}).items()}
    options = ["--widths", widths] if widths else []
    args = [str(exe), "optimize", "--json", "--workers", str(workers), *options,
            *map(str, folders)]
    if not memory:
        return subprocess.run(args, cwd=workdir, capture_output=True, text=True, env=env,
                              check=False, timeout=3600), 0
    peak = 0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        run = subprocess.Popen(args, cwd=workdir, stdout=out, stderr=err, text=True, env=env)
        while run.poll() is None:  # sampled: what decoders hold comes and goes in ms
            peak = max(peak, sum(_anon(p) for p in _tree(run.pid)))
            time.sleep(0.01)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, run.returncode, out.read(), err.read()), peak


def widest(result: dict[str, Any]) -> dict[str, Any]:
    return max((v for v in result["variants"] if v["format"] == "webp"), key=lambda v: v["width"])


def rgb_pixels(path: Path) -> np.ndarray[Any, Any]:
    """The picture as RGB, transparency flattened on white (pixels under full transparency
    are no part of what anyone sees)."""
    with Image.open(path) as image:
        if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
            white = Image.new("RGBA", image.size, (255, 255, 255, 255))
            return np.asarray(Image.alpha_composite(white, image.convert("RGBA")).convert("RGB"),
                              dtype=np.float32)
        return np.asarray(image.convert("RGB"), dtype=np.float32)


def worst_block(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    """The largest mean absolute difference of any 8x8 block (any channel)."""
    h, w = (a.shape[0] + 7) // 8 * 8, (a.shape[1] + 7) // 8 * 8
    diff = np.zeros((h, w, 3), dtype=np.float32)
    diff[:a.shape[0], :a.shape[1]] = np.abs(a - b)
    blocks = diff.reshape(h // 8, 8, w // 8, 8, 3).mean(axis=(1, 3))
    return float(blocks.max())


def write_inputs(workdir: Path, seeds: dict[str, bytes],
                 cases: list[Case]) -> tuple[Path, Path]:
    seed_dir, case_dir = workdir / "seeds", workdir / "cases"
    for folder, files in ((seed_dir, seeds), (case_dir, {c.file: c.data for c in cases})):
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
    return seed_dir, case_dir


def run_checked(workdir: Path, seed_dir: Path, case_dir: Path, report: Report,
                widths: str | None = None, settings: dict[str, str] | None = None,
                memory: bool = False) -> dict[str, dict[str, Any]]:
    """Run imgwarm over seeds and cases and check what holds whatever the format: exit
    status, JSON lines only, no internal error or crash, outputs whole, nothing left behind.
    The results by source path."""
    started = time.perf_counter()
    done, report.peak_memory = run_imgwarm(workdir, seed_dir, case_dir, widths=widths,
                                           settings=settings, memory=memory)
    report.seconds = time.perf_counter() - started
    report.exit_code = done.returncode
    if done.returncode not in (0, 1):
        report.find("exit status", f"exit status {done.returncode}: {done.stderr[-500:]}")
    results: dict[str, dict[str, Any]] = {}
    lines = done.stdout.split("\n")[:-1]  # JSON lines end in "\n" and nothing else
    for line in lines:
        try:
            found = json.loads(line)
        except ValueError:
            report.find("stdout not JSON", f"not a JSON line: {line[:200]!r}")
            continue
        results[found["source"]] = found
    inputs = {str(p) for p in [*seed_dir.iterdir(), *case_dir.iterdir()]}
    missing, extra = inputs - set(results), set(results) - inputs
    if missing or extra or len(lines) != len(inputs):
        report.find("JSON lines", f"{len(lines)} lines on stdout for {len(inputs)} inputs: "
                    f"missing {sorted(missing)[:3]}, extra {sorted(extra)[:3]}")
    for found in results.values():
        error = found.get("error") or ""
        for word, kind in (("internal error", "internal error"), ("crashed", "decoder crash")):
            if word in error:  # isolation kept the run going, but this is a defect
                report.internal_errors += 1
                report.find(kind, f"{kind}: {error}")
    for finding in _check_outputs(workdir, results):
        report.find("outputs", finding)
    return results


def check(workdir: Path, seeds: dict[str, bytes], cases: list[Case],
          widths: str | None = None, *, settings: dict[str, str] | None = None,
          memory: bool = False) -> Report:
    """Write seeds and cases (of one format), run imgwarm once over both, check every
    invariant. Small ``widths`` (e.g. "64,120") take the shrink-on-load path; the default
    decodes small seeds at full size."""
    seed_dir, case_dir = write_inputs(workdir, seeds, cases)
    report = Report(cases=len(cases))
    results = run_checked(workdir, seed_dir, case_dir, report, widths, settings, memory)
    seed_out = {Path(s).name: r for s, r in results.items() if Path(s).parent == seed_dir}
    format_name = cases[0].format if cases else "jpeg"
    if format_name != "jpeg" and FORMATS[format_name].decodable:
        for name, made in sorted(seed_out.items()):  # whole files: a refusal is a defect,
            if not made["ok"]:                        # one an earlier case caused, often
                report.find("clean seed refused", f"seed {name} refused: {made['error']}")
    for case in cases:
        found = results.get(str(case_dir / case.file))
        if found is None:
            continue
        if "internal error" in (found.get("error") or "") or \
                "crashed" in (found.get("error") or ""):
            report.errors_by_kind[case.kind] += 1
        if found["ok"]:
            report.accepted += 1
            report.accepted_by_kind[case.kind] += 1
            if not strict_decodes(case.format, case.data):
                report.strict_refused_accepted += 1
                report.compared_by_kind[case.kind] += 1
                for text in _compare(workdir, case, found, seed_out.get(case.seed)):
                    report.find("published though strict refuses", text, case)
        else:
            report.refused += 1
            report.refused_by_kind[case.kind] += 1
            report.reasons[_reason_class(found["error"])] += 1
            if any(w in found["error"] for w in ("corrupt", "truncated")) and \
                    strict_decodes(case.format, case.data):
                report.find("refused though strict reads it",
                            f"{case.name}: decodes strictly but was refused: "
                            f"{found['error']}", case)
    return report


def _check_outputs(workdir: Path, results: dict[str, dict[str, Any]]) -> list[str]:
    findings = []
    origin, manifests = workdir / "var" / "origin", workdir / "var" / "manifest"
    expected: dict[str, dict[str, Any]] = {}
    for found in results.values():
        for variant in found.get("variants", []) if found["ok"] else []:
            expected[variant["path"]] = variant
    present = {p.relative_to(origin).as_posix() for p in origin.rglob("*") if p.is_file()} \
        if origin.exists() else set()
    if FORMAT_RECORD in present:  # the store's, written by its first write: not a leftover
        present.discard(FORMAT_RECORD)
        if not expected:
            findings.append(f"{FORMAT_RECORD} written though no source was accepted")
        else:
            FormatRecord.parse((origin / FORMAT_RECORD).read_bytes(), FORMAT_RECORD)
    for leftover in sorted(present - set(expected))[:5]:
        findings.append(f"leftover file in the origin: {leftover}")
    manifest_files = [p for p in manifests.rglob("*.json") if p.is_file()
                      and p.relative_to(manifests).parts[0] not in (JOURNAL, REFS, DROPPED)
                      and p.parent != manifests] \
        if manifests.exists() else []
    if len(manifest_files) != sum(1 for r in results.values() if r["ok"]):
        findings.append(f"{len(manifest_files)} manifests for "
                        f"{sum(1 for r in results.values() if r['ok'])} accepted sources")
    for path, variant in expected.items():
        file = origin / path
        if not file.is_file():
            findings.append(f"missing variant {path}")
            continue
        data = file.read_bytes()
        digest = file.name.split(".")[-2]
        if not hashlib.sha256(data).hexdigest().startswith(digest) or len(data) != variant["bytes"]:
            findings.append(f"{path}: does not match its name or size")
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                size = image.size
        except Exception as error:
            findings.append(f"{path}: does not decode: {error}")
            continue
        if size != (variant["width"], variant["height"]):
            findings.append(f"{path}: is {size}, recorded {variant['width']}x{variant['height']}")
    return findings


def _compare(workdir: Path, case: Case, found: dict[str, Any],
             seed: dict[str, Any] | None) -> list[str]:
    """An accepted case that strict decoding refuses must show the seed's picture."""
    if seed is None or not seed["ok"]:
        why = seed["error"] if seed else "no result"
        return [f"{case.name}: accepted, refused strictly, and its seed gives no picture "
                f"({why})"]
    mine, theirs = widest(found), widest(seed)
    if (mine["width"], mine["height"]) != (theirs["width"], theirs["height"]):
        return [f"{case.name}: accepted, refused strictly, and its size differs from the seed's"]
    origin = workdir / "var" / "origin"
    worst = worst_block(rgb_pixels(origin / mine["path"]),
                        rgb_pixels(origin / theirs["path"]))
    if worst > VISIBLE:
        return [f"{case.name}: accepted, refused strictly, and an 8x8 block differs from the "
                f"seed's output by {worst:.1f} on average"]
    return []
