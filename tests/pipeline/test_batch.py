"""Batch: parallel sources, each with its own result and its own error text."""

from __future__ import annotations

from pathlib import Path

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import SourceError
from imgwarm.pipeline.batch import collect_sources, run_batch
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.origin import Stores
from tests.images import photo


def damaged_files(folder: Path) -> list[Path]:
    """Good and differently damaged JPEGs, interleaved."""
    folder.mkdir()
    made = []
    for i in range(6):
        data = bytes(photo(900 + 40 * i, 700, seed=i).jpegsave_buffer(Q=90,
                                                                     interlace=bool(i % 2)))
        sof = data.find(b"\xff\xc0") if i % 2 == 0 else data.find(b"\xff\xc2")
        for kind, content in (("good", data), ("cut", data[: len(data) // 2]),
                              ("header", data[:sof]), ("twelve-bit", _twelve_bit(data, sof))):
            path = folder / f"{i}-{kind}.jpg"
            path.write_bytes(content)
            made.append(path)
    return made


def _twelve_bit(data: bytes, sof: int) -> bytes:
    return data[: sof + 4] + b"\x0c" + data[sof + 5:]  # frame header says 12-bit precision


def test_each_error_is_its_own_file_s(settings: Settings, tmp_path: Path) -> None:
    files = damaged_files(tmp_path / "mixed")
    alone = {}
    for path in files:
        try:
            optimize_file(path, settings=settings, stores=Stores.local(settings))
        except SourceError as error:
            alone[str(path)] = str(error)
    assert len(alone) == 18
    parallel = load_settings(**{**settings.model_dump(), "workers": 2,
                                "origin_root": tmp_path / "o2", "manifest_root": tmp_path / "m2"})
    for _ in range(3):
        results = {r.source: r for r in run_batch(files, parallel)}
        assert {s for s, r in results.items() if not r.ok} == set(alone)
        for source, message in alone.items():
            assert results[source].error == message


def test_collect_sources(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / ".hidden").mkdir()
    for name in ("a/x.JPG", "a/b/y.png", "a/notes.txt", "a/.z.jpg", "a/.hidden/w.jpg"):
        (tmp_path / name).write_bytes(b"")
    found = collect_sources([str(tmp_path / "a"), str(tmp_path / "named.txt"),
                             str(tmp_path / "a" / "x.JPG")])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "a/x.JPG", "a/b/y.png", "named.txt"]
