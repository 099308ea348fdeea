"""How results are shown: one human line, or one JSON object, per source; a progress bar on a
terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import click

from imgwarm.reporting import size_words as _size
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.manifest import Manifest, SourceResult


def json_line(result: SourceResult) -> str:
    """The ``--json`` object of a source (the shape is a public contract)."""
    from imgwarm.cli.common import json_text

    return json_text(result.to_object())




def summarize(manifest: Manifest) -> str:
    """``4032x3024 -> webp 320..1920 (4), jpeg 320..1920 (4), 1.2 MiB``."""
    parts = []
    for fmt in dict.fromkeys(v.format for v in manifest.variants):
        widths = [v.width for v in manifest.variants if v.format == fmt]
        span = f"{widths[0]}" if len(widths) == 1 else f"{widths[0]}..{widths[-1]}"
        parts.append(f"{fmt} {span} ({len(widths)})")
    total = sum(v.bytes for v in manifest.variants)
    return f"{manifest.width}x{manifest.height} -> {', '.join(parts)}, {_size(total)}"


def human_line(result: SourceResult) -> str:
    """One terminal line, whatever the file name holds (newlines, escapes, odd bytes)."""
    if result.manifest is None:
        return printable(f"FAILED {result.error}")
    state = "unchanged" if result.reused else "done"
    warned = "".join(f"; warning: {w}" for w in result.manifest.warnings)
    return printable(f"{state:9} {result.source}  {summarize(result.manifest)}{warned}")


def _progress_bar() -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    redirect_stdout=False, redirect_stderr=False)


@contextlib.contextmanager
def bars(as_json: bool, doing: str) -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback, ``(part, done, total)``, that draws a bar a part on a terminal
    (and nothing with ``--json`` or elsewhere), for a long run of a library call."""
    bar = _progress_bar() if sys.stderr.isatty() and not as_json else None
    if bar is None:
        yield lambda *_: None
        return
    tasks: dict[str, Any] = {}

    def progress(part: str, done: int, total: int) -> None:
        if part not in tasks:
            tasks[part] = bar.add_task(f"{doing} ({part})", total=total)
        bar.update(tasks[part], completed=done, total=total)

    bar.start()
    try:
        yield progress
    finally:
        bar.stop()


def quality_lines(manifest: Manifest) -> list[str]:
    """``  webp   640 q71 checked, score 76.2``: a line a variant. An auto quality was either
    checked (searched, its SSIMULACRA2 score said) or predicted (the widest checked width's,
    taken unchecked: quality_check_width); a fixed one is neither."""
    lines = []
    for v in manifest.variants:
        quality = "q?" if v.quality is None else f"q{v.quality}"
        how = ""
        if v.predicted:
            how = " predicted, not scored"
        elif v.score is not None:
            how = f" checked, score {v.score:.1f}"
        chroma = " 4:4:4" if v.full_chroma else ""
        lines.append(f"  {v.format:4} {v.width:5} {quality}{chroma}{how}"
                     f"{' HDR' if v.hdr else ''}")
    return lines


def show(results: Iterable[SourceResult], total: int, as_json: bool, doing: str, *,
         qualities: bool = False) -> int:
    """Show results as they come: to stdout, failures to stderr, the bar (on a terminal, for
    several sources) to stderr. Returns how many sources failed."""
    show_bar = not as_json and sys.stderr.isatty() and total > 1
    progress = _progress_bar() if show_bar else None  # rich is imported only for a TTY
    failed = 0

    def emit(line: str, err: bool) -> None:
        stream = sys.stderr if err else sys.stdout
        if progress is not None and stream.isatty():  # above the bar, on the same terminal
            progress.console.print(line, markup=False, highlight=False, emoji=False)
        else:
            click.echo(line, err=err)

    with progress if progress is not None else nullcontext():
        task = progress.add_task(doing, total=total) if progress else None
        for result in results:
            failed += not result.ok
            if as_json:
                click.echo(json_line(result))
            else:
                emit(human_line(result), err=not result.ok)
                if qualities and result.manifest is not None:
                    for line in quality_lines(result.manifest):
                        emit(line, err=False)
            if progress is not None and task is not None:
                progress.advance(task)
    return failed
