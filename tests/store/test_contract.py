"""The Store contract: what every implementation promises (store/base.py), checked against each
of them: the local folder, S3 over real HTTP on two servers (moto's, and SeaweedFS, a real
object store), and the cache tiers (RAM on a tmpfs mounted for the test, NVMe on disk).

A new Store adds a ``Kind`` to KINDS: how to make one, and how to kill a writer of it in the
middle of a write.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imgwarm.exceptions import LayoutError
from imgwarm.store import LocalStore, ObjectTooLarge, Store
from tests.support.s3 import on_s3, s3_params, s3_server

KEY = "1f/54/2a/cat.0123456789abcdef.webp"
UNSAFE = ["../x.jpg", "/abs.jpg", "a/../../x.jpg", "a/./b.jpg", "a//b.jpg", "", "a\x00b.jpg",
          "a\\b.jpg", "a/\u202ecod.jpg", "new\nline.jpg", "odd\udcff.jpg"]


@dataclass
class Kind:
    name: str
    make: Callable[[], Store]
    # A script that writes ``sys.argv[2]`` bytes at KEY and is killed halfway through, and the
    # argument that tells it where the store is.
    killer: str
    where: str


def _local(tmp_path: Path) -> Kind:
    root = tmp_path / "local"
    root.mkdir()
    killer = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from imgwarm.store import local\n"
        "local.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # data written\n"
        f"local.LocalStore(Path(sys.argv[1])).write({KEY!r}, b'x' * int(sys.argv[2]))\n"
    )
    return Kind("local", lambda: LocalStore(root, max_entries=20), killer, str(root))


def _s3(s3_server: Any) -> Kind:  # moto's or SeaweedFS's
    from imgwarm.config import load_settings
    from imgwarm.store.s3 import S3Store, make_client

    bucket = s3_server.new_bucket()
    settings = load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=s3_server.endpoint,
                             s3_region="us-east-1", s3_timeout=5)
    killer = (
        "import http.client, os, signal, sys\n"
        "from imgwarm.config import load_settings\n"
        "from imgwarm.store.s3 import S3Store, make_client\n"
        "send = http.client.HTTPConnection.send\n"
        "def half(self, data):  # the body goes out in part, then the writer dies\n"
        "    if len(data) > 100_000:\n"
        "        send(self, data[:len(data) // 2]); os.kill(os.getpid(), signal.SIGKILL)\n"
        "    send(self, data)\n"
        "http.client.HTTPConnection.send = half\n"
        "s = load_settings(origin='s3', s3_bucket=sys.argv[1], s3_endpoint_url="
        f"{s3_server.endpoint!r}, s3_region='us-east-1')\n"
        f"S3Store(make_client(s.store), sys.argv[1], 'p/').write({KEY!r}, "
        "b'x' * int(sys.argv[2]))\n"
    )
    return Kind(s3_server.name, lambda: S3Store(make_client(settings.store), bucket, "p/"),
                killer, bucket)


def _tier(tmp_path: Path, name: str) -> Iterator[Kind]:
    from imgwarm.cache.tiers import Tier
    from tests.support.tmpfs import mounted_tmpfs

    def kind(root: Path) -> Kind:
        killer = (
            "import os, signal, sys\n"
            "from pathlib import Path\n"
            "from imgwarm.cache.tiers import Tier\n"
            "from imgwarm.store import local\n"
            "real = local._write_all\n"
            "def dying(fd, data):  # data written, the writer dies before the name is linked\n"
            "    real(fd, data)\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "local._write_all = dying\n"
            f"Tier({name!r}, Path(sys.argv[1]), max_entries=20).write({KEY!r}, "
            "b'x' * int(sys.argv[2]))\n"
        )
        return Kind(f"{name}-tier", lambda: Tier(name, root, max_entries=20), killer,
                    str(root))

    if name == "ram":
        with mounted_tmpfs(tmp_path / "tmpfs", "16m") as root:
            yield kind(root)
    else:
        yield kind(tmp_path / "nvme")


@pytest.fixture(params=["local", *s3_params(),
                        pytest.param("ram-tier", marks=pytest.mark.root), "nvme-tier"])
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kind]:
    if request.param == "local":
        yield _local(tmp_path)
    elif on_s3(request.param):
        yield _s3(s3_server(request, request.param))
    else:
        yield from _tier(tmp_path, request.param.split("-")[0])


def test_write_exists_read(kind: Kind) -> None:
    store = kind.make()
    assert not store.exists(KEY) and store.read(KEY) is None
    assert store.write(KEY, b"RIFF1") is True
    assert store.exists(KEY) and store.read(KEY) == b"RIFF1"
    assert store.write(KEY, b"other") is False  # content-addressed: an existing file is kept
    assert store.read(KEY) == b"RIFF1"
    assert store.write(KEY, b"RIFF2", replace=True) is True
    assert store.read(KEY) == b"RIFF2"


def test_delete(kind: Kind) -> None:
    store = kind.make()
    store.write(KEY, b"data")
    store.delete(KEY)
    assert not store.exists(KEY) and store.read(KEY) is None
    store.delete(KEY)  # nothing there: nothing happens


def test_read_with_a_limit_refuses_before_reading(kind: Kind) -> None:
    store = kind.make()
    store.write(KEY, b"x" * 1000)
    assert store.read(KEY, limit=1000) == b"x" * 1000
    with pytest.raises(ObjectTooLarge) as refused:
        store.read(KEY, limit=999)
    assert refused.value.size == 1000


def test_describe_says_where(kind: Kind) -> None:
    assert kind.make().describe(KEY).endswith(KEY)


@pytest.mark.parametrize("key", UNSAFE)
def test_unsafe_keys_are_refused_by_every_operation(kind: Kind, key: str) -> None:
    store = kind.make()
    for operation in (lambda: store.write(key, b"x"), lambda: store.read(key),
                      lambda: store.exists(key), lambda: store.delete(key),
                      lambda: store.describe(key)):
        with pytest.raises(LayoutError):
            operation()


def test_a_writer_killed_mid_write_leaves_nothing(kind: Kind) -> None:
    size = 3_000_000
    done = subprocess.run([sys.executable, "-c", kind.killer, kind.where, str(size)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    store = kind.make()
    found = store.read(KEY)
    assert found is None or found == b"x" * size  # never a part of it
    assert found is None  # here: killed before the data was all there


FOLDER_KINDS = ["local", "ram-tier", "nvme-tier"]  # file systems (S3 has no folders)


@pytest.mark.parametrize("kind", FOLDER_KINDS, indirect=True)
def test_a_folder_holds_at_most_max_entries(kind: Kind) -> None:
    store = kind.make()
    for i in range(20):
        assert store.write(f"full/{i}.webp", b"x")
    with pytest.raises(LayoutError, match="already holds 20 entries"):
        store.write("full/20.webp", b"x")
    assert store.write("full/3.webp", b"y") is False  # an existing one is still fine


def test_files_lists_every_file_and_no_temporary_one(kind: Kind) -> None:
    store = kind.make()
    keys = {"a/b/one.webp", "a/c/two.webp", "three.jpg"}
    for key in keys:
        store.write(key, b"x")
    assert {str(k) for k in store.files()} >= keys
    assert {str(k) for k in store.files("a")} == {"a/b/one.webp", "a/c/two.webp"}
    assert not any(".tmp-" in str(k) for k in store.files())


def test_stamped_lists_with_write_times_and_size_reads_no_bytes(kind: Kind) -> None:
    import time

    store = kind.make()
    before = time.time() - 5  # (S3 keeps whole seconds)
    store.write("a/b/one.webp", b"x" * 7)
    store.write("a/two.webp", b"yy")
    found = dict(store.stamped("a"))
    assert {str(k) for k in found} == {"a/b/one.webp", "a/two.webp"}
    assert all(before <= when <= time.time() + 5 for when in found.values())
    assert (store.size("a/b/one.webp"), store.size("a/two.webp")) == (7, 2)
    assert store.size("a/none.webp") is None and store.size("a") is None
