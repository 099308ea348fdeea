"""bench/placement.py --trace: a trace replayed through warm's own index, log reader, scoring
and planning, on a trace small enough that its answer is worked out by hand below."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

PLACEMENT = Path(__file__).resolve().parents[2] / "bench" / "placement.py"
PAGE = 4096
WIDE = 200_000  # 49 pages

# Budget: two pages. Every 100 s a placement; requests before 50 s are not counted. The
# half-life (24 h) makes every request's weight 1 to within 0.3% over these 220 s.
TRACE = f"""\
U\t0\ta.webp\t4000\t320
U\t0\tb.webp\t4000\t320
U\t0\tc.webp\t4000\t320
U\t0\tbig.webp\t9000\t320
U\t0\twide.webp\t{WIDE}\t1280
R\t10\tc.webp
R\t20\tc.webp
R\t30\tc.webp
R\t60\ta.webp
R\t70\twide.webp
R\t100\tb.webp
R\t110\tc.webp
R\t120\ta.webp
U\t130\td.webp\t4000\t320
R\t140\td.webp
R\t200\td.webp
R\t210\ta.webp
R\t220\tc.webp
"""
# At 0: no traffic; every variant's prior is one request's weight: a, b, c tie (1 a page)
#   and go by path: {a, b}; big (3 pages) and wide (1280 px, over ram_max_width) never fit.
#   Counted: 60 a hit, 70 wide miss.
# At 100: scores c 3, a 1 (wide's does not count: too wide): densities c 4, a 2, b 1:
#   {c, a}. Counted: 100 b miss (a request at a placement's time is judged by it), 110 c
#   hit, 120 a hit, 140 d miss (uploaded at 130: not placed until the next run).
# At 200: d's prior is the 90th percentile of the scores before this run's log (1, 1, 3:
#   3), then its one request: 4; c 1 + 4 = 5, a 1 + 2 = 3: {c, d}. Counted: 200 d hit,
#   210 a miss, 220 c hit.
HITS, REQUESTS = 5, 9
HIT_PAGES = 5 * PAGE
ALL_PAGES = 8 * PAGE + -(-WIDE // PAGE) * PAGE


def _replay(trace: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PLACEMENT), "--trace", str(trace), "--ram-budget", str(2 * PAGE),
         "--warmup", "50", "--interval", "100", *extra],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("packed", [True, False])
def test_the_replay_gives_the_answer_worked_out_by_hand(tmp_path: Path, packed: bool) -> None:
    trace = tmp_path / ("t.tsv.gz" if packed else "t.tsv")
    trace.write_bytes(gzip.compress(TRACE.encode()) if packed else TRACE.encode())
    done = _replay(trace, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found) >= {"object_hit_ratio", "byte_hit_ratio", "requests", "placements",
                          "planning_seconds"}
    assert found["requests"] == REQUESTS and found["placements"] == 3
    assert found["object_hit_ratio"] == pytest.approx(HITS / REQUESTS, abs=1e-6)
    assert found["byte_hit_ratio"] == pytest.approx(HIT_PAGES / ALL_PAGES, abs=1e-6)
    assert found["planning_seconds"] >= 0


def test_the_settings_it_is_given_are_warm_s(tmp_path: Path) -> None:
    """ram_max_width below every width: nothing is placed, every request a miss; a budget of
    60 pages and no width limit: everything is placed from the first run, and only d, asked
    before the run after its upload, misses (once)."""
    trace = tmp_path / "t.tsv"
    trace.write_text(TRACE)
    narrow = json.loads(_replay(trace, "--json", "--ram-max-width", "100").stdout)
    assert narrow["object_hit_ratio"] == 0 and narrow["requests"] == REQUESTS
    done = subprocess.run(
        [sys.executable, str(PLACEMENT), "--trace", str(trace), "--ram-budget",
         str(60 * PAGE), "--warmup", "50", "--interval", "100", "--ram-max-width", "2000",
         "--json"], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout)["object_hit_ratio"] == pytest.approx(
        (REQUESTS - 1) / REQUESTS, abs=1e-6)


@pytest.mark.parametrize(("data", "says"), [
    (b"U\t0\ta.webp\t4000\n", "line 1: expected U<TAB>t"),
    (b"U\t0\ta.webp\t4000\t320\nR\tsoon\ta.webp\n", "line 2: t 'soon' is not a number"),
    (b"U\t5\ta.webp\t4000\t320\nR\t4\ta.webp\n", "line 2: t 4 is before the line above's 5"),
    (b"U\t0\ta.webp\t4000\t320\nR\t1\tb.webp\n", "line 2: a request for b.webp before any U"),
    (b"U\t0\t../a.webp\t4000\t320\n", "line 1: path '../a.webp'"),
    (b"U\t0\ta.webp\t0\t320\n", "line 1: bytes and width must be at least 1"),
    (b"U\t0\ta.webp\t10\t320\nU\t1\ta.webp\t10\t320\n", "line 2: a.webp is announced twice"),
    (b"U\t0\ta\xff.webp\t4000\t320\n", "line 1: path"),  # not UTF-8
    (b"U\t0\ta\x07.webp\t4000\t320\n", "line 1: path"),  # a control character
    (b'U\t0\t{a}"b.webp\t4000\t320\n', "line 1: path"),  # a quote
    (b"U\t0\ta.webp\t" + b"9" * 5000 + b"\t320\n", "line 1: over 4096 characters"),
    (gzip.compress(TRACE.encode(), mtime=0)[:-30], "placement:"),  # a gzip cut short
])
def test_a_bad_or_hostile_trace_is_named_and_nothing_is_printed(tmp_path: Path, data: bytes,
                                                                says: str) -> None:
    trace = tmp_path / "bad.tsv"
    trace.write_bytes(data)
    done = _replay(trace, "--json")
    assert done.returncode != 0 and done.stdout == ""
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
