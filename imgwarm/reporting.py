"""What long commands share: progress as they go, the shape of what they report at the end,
and sizes in words. Light on purpose (no imports of ours): a worker process may load it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

# Progress as it goes: (what is being done, how many done, of how many), called often; the
# CLI draws it (cli/report.py), the Python API passes nothing or its own
Progress = Callable[[str, int, int], None]

MIB = 1 << 20


@runtime_checkable
class Report(Protocol):
    """What a command reports at its end: an object for ``--json`` (its keys a public
    contract) and one line for a log or a terminal."""

    def to_object(self) -> dict[str, Any]: ...

    def line(self) -> str: ...


def mib(size: float, digits: int = 1) -> str:
    """Bytes in MiB, as every report writes them: ``1,234.5 MiB``."""
    return f"{size / MIB:,.{digits}f} MiB"


def size_words(size: float) -> str:
    """Bytes in KiB under a MiB, else in MiB: ``12 KiB``, ``1.2 MiB``."""
    return f"{size / 1024:.0f} KiB" if size < MIB else mib(size)
