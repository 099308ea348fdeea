"""nginx access logs as the cache tests write them: combined-format lines, plain or gzipped."""

from __future__ import annotations

import gzip
import time
from pathlib import Path


def log_line(path: str, when: float, status: int = 200, method: str = "GET",
             agent: str = "Mozilla/5.0") -> str:
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(when))
    return (f'203.0.113.7 - - [{stamp}] "{method} {path} HTTP/1.1" {status} 1234 '
            f'"https://example.com/" "{agent}"\n')


def write_log(file: Path, lines: list[str], *, gzipped: bool = False, append: bool = False) -> None:
    data = "".join(lines).encode()
    if gzipped:
        file.write_bytes(gzip.compress(data))
    else:
        with file.open("ab" if append else "wb") as handle:
            handle.write(data)


def requests(paths: dict[str, int], when: float) -> list[str]:
    """``count`` requests of each URL path, at ``when``."""
    return [log_line(f"/{p}", when) for p, n in paths.items() for _ in range(n)]
