"""What long commands share (imgwarm/reporting.py): one Progress, one report shape, one way to
write sizes."""

from __future__ import annotations

import pytest

from imgwarm import reporting
from imgwarm.cache import run as warm_run
from imgwarm.cache.report import WarmReport
from imgwarm.events.actions import Queued
from imgwarm.lifecycle import fsck, gc
from imgwarm.lifecycle.delete import Deletion
from imgwarm.lifecycle.fanout import FanOut
from imgwarm.reporting import Report, mib, size_words


def test_warm_gc_and_fsck_take_the_one_progress() -> None:
    assert warm_run.Progress is gc.Progress is fsck.Progress is reporting.Progress


@pytest.mark.parametrize("kind", [WarmReport, gc.GcReport, fsck.FsckReport, Deletion, Queued,
                                  FanOut])
def test_every_report_has_the_one_shape(kind: type) -> None:
    assert issubclass(kind, Report)
    for name in ("to_object", "line"):
        assert callable(getattr(kind, name))


def test_sizes_are_written_one_way() -> None:
    assert mib(0) == "0.0 MiB"
    assert mib(3 << 20) == "3.0 MiB"
    assert mib(1536 * (1 << 20)) == "1,536.0 MiB"
    assert mib(200 << 20, digits=0) == "200 MiB"
    assert size_words(12 * 1024) == "12 KiB"
    assert size_words((1 << 20) + (1 << 19)) == "1.5 MiB"
