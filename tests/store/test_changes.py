"""The manifest store's journal: readers learn what changed after their cursor, and nothing
else, on a local folder and on S3 (moto's server and SeaweedFS's)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from imgwarm.store.changes import FOLDER, LocalChangeLog, S3ChangeLog
from tests.support.s3 import s3_params
from tests.support.s3 import s3_server as named_server


def test_local_entries_after_the_cursor_only(tmp_path: Path) -> None:
    journal = LocalChangeLog(tmp_path)
    first = journal.since("")
    assert first.entries == []
    journal.append("a.jpg")
    journal.append("b.jpg")
    batch = journal.since(first.cursor)
    assert [k for _, k in batch.entries] == ["a.jpg", "b.jpg"]
    journal.append("c.jpg")
    later = journal.since(batch.cursor)
    assert [k for _, k in later.entries] == ["c.jpg"]
    assert journal.since(later.cursor).entries == []


def test_local_hours_days_and_years_roll_over(tmp_path: Path) -> None:
    journal = LocalChangeLog(tmp_path)
    old = tmp_path / "changes" / "2025" / "12" / "31" / "23.log"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"t": 1.0, "key": "old.jpg"}) + "\n{damaged\n")
    cursor = journal.since("").cursor
    assert cursor.startswith("2025/12/31/23.log:")
    journal.append("new.jpg")  # this hour, in this year's folders
    batch = journal.since(cursor)
    assert [k for _, k in batch.entries] == ["new.jpg"]
    everything = journal.since("")
    assert [k for _, k in everything.entries] == ["old.jpg", "new.jpg"]  # damaged line skipped


def test_local_now_skips_what_is_there(tmp_path: Path) -> None:
    journal = LocalChangeLog(tmp_path)
    journal.append("before.jpg")
    cursor = journal.now()
    journal.append("after.jpg")
    assert [k for _, k in journal.since(cursor).entries] == ["after.jpg"]


@pytest.mark.parametrize("server", s3_params())
def test_s3_entries_after_the_cursor_and_late_writers(server: str,
                                                       request: pytest.FixtureRequest) -> None:
    from imgwarm.config import load_settings
    from imgwarm.store.s3 import S3Store, make_client

    s3_server = named_server(request, server)
    bucket = s3_server.new_bucket()
    settings = load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=s3_server.endpoint,
                             s3_region="us-east-1")
    store = S3Store(make_client(settings.store), bucket, "p/.imgwarm/manifests/")
    journal = S3ChangeLog(store)
    journal.append("early.jpg")
    cursor = journal.now()
    journal.append("a.jpg")
    batch = journal.since(cursor)
    assert [k for _, k in batch.entries] == ["a.jpg"]
    # A writer whose clock is a minute behind: its entry sorts before the cursor, and is
    # still read (once), because every read looks again over the last SKEW seconds.
    behind = time.time() - 60
    name = f"changes/{time.strftime('%Y/%m/%d/%H', time.gmtime(behind))}/" \
           f"{int(behind * 1e9):020d}-late"
    store.write(name, json.dumps({"t": behind, "key": "late.jpg"}).encode())
    again = journal.since(batch.cursor)
    assert [k for _, k in again.entries] == ["late.jpg"]
    assert journal.since(again.cursor).entries == []


def test_hostile_journal_entries_and_cursors_are_skipped(tmp_path: Path) -> None:
    journal = LocalChangeLog(tmp_path)
    journal.append("good.jpg")
    hour = next((tmp_path / FOLDER).rglob("*.log"))
    with hour.open("ab") as log:
        log.write(b'{"t": NaN, "key": "nan.jpg"}\n{"t": 1e400, "key": "inf.jpg"}\n')
        log.write(b"[" * 100_000 + b"\n")  # nested past the parser's recursion limit
        log.write(b'{"t": 1, "key": ["not", "a", "key"]}\n\xff\xfe garbage\n')
        log.write(b'{"t": 1, "key": "' + b"k" * 70_000 + b'"}\n')  # beyond MAX_ENTRY
    (hour.parent / "stray").mkdir()  # a folder where an hour file would be...
    (tmp_path / FOLDER / "1999").write_bytes(b"a stray file where a year folder would be")
    journal.append("later.jpg")
    assert [k for _, k in journal.since("").entries] == ["good.jpg", "later.jpg"]
    for cursor in ("", "2026/11/23/12.log:0"):
        assert journal.readable(cursor)
    for cursor in ('{"after": "", "seen": []}', "../../etc/passwd:0", "x.log:-1",
                   "2026/11/23/12.log:99999999999999999999"):
        assert not journal.readable(cursor)  # warm then lists everything instead
