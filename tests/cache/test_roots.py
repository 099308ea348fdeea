"""Roots another local user could control are refused (a RAM root in /dev/shm squatted by
`nobody` before imgwarm made it, a parent of theirs, one anyone may write; an origin its web
app's group may write), and so are `/` and the system folders; roots are made 0755 under
private parents, whatever the umask; a file warm did not write is never trusted for its
size."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import SettingsError
from tests.support import parts
from tests.support.cli import Cli
from tests.support.images import jpeg_with_exif, photo
from tests.support.sites import Site, thumbnails

SHM = Path("/dev/shm")


def as_nobody(*command: str) -> None:
    parts.root("making a folder as another user")
    setpriv = parts.binary("setpriv", "util-linux")
    subprocess.run([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                    *command], check=True)


@pytest.fixture
def shm_name() -> Iterator[Path]:
    """A fresh name in /dev/shm (world-writable, sticky: anyone may make it first)."""
    path = SHM / f"imgwarm-test-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def cache_settings(settings: Settings, tmp_path: Path, ram_root: Path) -> Settings:
    return settings.updated(ram_root=ram_root, nvme_root=tmp_path / "nvme",
                            cache_state=tmp_path / "state", origin_root=tmp_path / "origin",
                            manifest_root=tmp_path / "manifest")


def refused(settings: Settings, match: str) -> str:
    from imgwarm.cache.warm import warm

    with pytest.raises(SettingsError, match=match) as caught:
        warm(settings)
    return str(caught.value)


def test_a_ram_root_squatted_by_another_user_is_refused(settings: Settings, tmp_path: Path,
                                                        shm_name: Path) -> None:
    as_nobody("mkdir", "-m", "0777", str(shm_name))  # after a reboot, before imgwarm
    said = refused(cache_settings(settings, tmp_path, shm_name), "owned by uid")
    assert "another user made it" in said and f"rm -rf {shm_name}" in said
    assert not any(shm_name.iterdir())  # nothing written into it
    done = Cli()("warm", env={"IMGWARM_RAM_ROOT": str(shm_name),
                              "IMGWARM_NVME_ROOT": str(tmp_path / "nvme"),
                              "IMGWARM_CACHE_STATE": str(tmp_path / "state")})
    assert done.exit_code == 2 and "owned by uid" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_squatted_parent_is_refused_even_when_the_root_is_missing(
        settings: Settings, tmp_path: Path, shm_name: Path) -> None:
    as_nobody("mkdir", "-m", "0755", str(shm_name))  # nobody's, not writable by us...
    said = refused(cache_settings(settings, tmp_path, shm_name / "ram"), "above it is owned")
    assert str(shm_name) in said
    assert not (shm_name / "ram").exists()


def test_a_root_anyone_may_write_is_refused(settings: Settings, tmp_path: Path,
                                            shm_name: Path) -> None:
    shm_name.mkdir()
    shm_name.chmod(0o777)  # ours, but open to all
    said = refused(cache_settings(settings, tmp_path, shm_name), "writable by group or others")
    assert f"chmod go-w {shm_name}" in said
    shm_name.chmod(0o755)
    (tmp_path / "nvme").mkdir(mode=0o700)
    (tmp_path / "nvme").chmod(0o775)  # the NVMe root: the same rule
    refused(cache_settings(settings, tmp_path, shm_name), "NVMe tier .* writable by group")


def test_the_default_ram_root_is_a_private_folder_of_its_own(shm_name: Path,
                                                             tmp_path: Path) -> None:
    from imgwarm.cache.tiers import Tiers

    assert load_settings().cache.ram_root == SHM / f"imgwarm-{os.geteuid()}" / "ram"
    root = shm_name / "ram"
    os.umask(0o000)  # a careless umask changes nothing: modes are set
    try:
        Tiers.open(root, tmp_path / "nvme" / "deep", max_entries=255, allow_non_tmpfs=False)
    finally:
        os.umask(0o022)
    for folder in (shm_name, root, tmp_path / "nvme", tmp_path / "nvme" / "deep"):
        info = folder.stat()
        assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o755, folder


@pytest.mark.slow
def test_a_planted_file_of_the_right_size_is_replaced(site: Site) -> None:
    """Files under a tier root before warm ever wrote there (made while the root was another
    user's, or left by hand): the same size as the variant, other bytes."""
    small = thumbnails(site)
    planted = []
    for root, paths in ((site.settings.cache.nvme_root, {v.path: v.bytes for m in
                                                         site.manifests() for v in m.variants}),
                        (site.settings.cache.ram_root, small)):
        for key, size in paths.items():
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_bytes(b"\x00" * size)
            planted.append((root / key, key))
    report = site.warm()
    assert report.ram.copied == len(small)
    origin = site.settings.store.origin_root
    for path, key in planted:
        assert path.read_bytes() == (origin / key).read_bytes(), path


@pytest.mark.slow
def test_a_file_swapped_on_nvme_is_not_copied_on_to_ram(site: Site) -> None:
    site.settings = site.settings.updated(ram_budget="4K")  # NVMe first, RAM nearly nothing
    site.warm()
    thumbs = thumbnails(site)
    nvme, origin = site.settings.cache.nvme_root, site.settings.store.origin_root
    for path in thumbs:  # same size, another inode and bytes: not what warm wrote
        size = (nvme / path).stat().st_size
        (nvme / path).unlink()
        (nvme / path).write_bytes(b"\x01" * size)
    site.settings = site.settings.updated(ram_budget="60M")
    report = site.warm()
    assert report.ram.held == len(thumbs) and report.ram.copied >= len(thumbs) - 1  # 4K: one
    ram = site.settings.cache.ram_root
    for path in thumbs:
        assert (ram / path).read_bytes() == (origin / path).read_bytes(), path


COMMANDS = (("nginx", "--check"), ("warm",), ("optimize",))


def origin_refused(tmp_path: Path, origin: Path | str, match: str,
                   commands: tuple[tuple[str, ...], ...] = COMMANDS) -> None:
    """``nginx --check``, ``warm`` and ``optimize`` (or ``commands``) each refuse the origin in
    one line, and write nothing."""
    source = tmp_path / "one.jpg"
    if not source.exists():
        source.write_bytes(jpeg_with_exif(photo(300, 200), quality=85))
    env = {"IMGWARM_ORIGIN_ROOT": str(origin), "IMGWARM_MANIFEST_ROOT": str(tmp_path / "m"),
           "IMGWARM_NVME_ROOT": str(tmp_path / "nvme"), "IMGWARM_CACHE_STATE": str(tmp_path / "s"),
           "IMGWARM_RAM_ROOT": str(tmp_path / "ram"), "IMGWARM_RAM_ALLOW_NON_TMPFS": "true"}
    for args in commands:
        done = Cli()(*args, *((str(source),) if args == ("optimize",) else ()), env=env)
        said = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        assert done.exit_code == 2 and "Traceback" not in done.stderr, (args, done.stderr)
        assert len(said) == 1 and re.search(match, said[0]), (args, said)
        assert "origin_root" in said[0]
    assert not (tmp_path / "m").exists()


def test_an_origin_others_may_write_is_refused(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    for mode in (0o777, 0o775):  # anyone; the web app's group (it writes originals there)
        origin.chmod(mode)
        origin_refused(tmp_path, origin, rf"writable by group or others .*chmod go-w {origin}")
    assert not any(origin.iterdir())


def test_an_origin_of_another_user_is_refused(tmp_path: Path) -> None:
    parts.root("making a folder another user's")
    origin = tmp_path / "origin"
    origin.mkdir(mode=0o755)
    os.chown(origin, 65534, 65534)
    origin_refused(tmp_path, origin, "owned by uid 65534", (("warm",), ("optimize",)))
    # root writing the nginx config of a service that runs as the roots' owner: taken, but
    # not what that user's group or others may write
    env = {"IMGWARM_ORIGIN_ROOT": str(origin), "IMGWARM_NVME_ROOT": str(tmp_path / "nvme"),
           "IMGWARM_RAM_ROOT": str(tmp_path / "ram")}
    assert Cli()("nginx", "--check", env=env).exit_code == 0
    origin.chmod(0o775)
    origin_refused(tmp_path, origin, "writable by group or others", (("nginx", "--check"),))


@pytest.mark.parametrize(("origin", "said"), [
    ("/", r"the whole file system"), ("/etc", "a system folder"), ("/usr", "a system folder"),
    ("/proc/self", r"under a system folder \(/proc\)"),
    ("/usr/lib/imgwarm", r"under a system folder \(/usr/lib\)"),
])
def test_the_system_folders_are_never_a_root(tmp_path: Path, origin: str, said: str) -> None:
    before = set(os.listdir("/"))
    origin_refused(tmp_path, origin, said)
    assert set(os.listdir("/")) == before  # no shard folder made in /
    from imgwarm.cache.tiers import Tiers

    with pytest.raises(SettingsError, match="system folder"):  # nor any other root
        Tiers.open(tmp_path / "ram", Path("/etc/imgwarm-nvme"), max_entries=255,
                   allow_non_tmpfs=True)


def test_folders_made_under_a_group_umask_are_not_group_writable(tmp_path: Path) -> None:
    """A web app's usual umask (002) must not make the origin's folders group-writable: the
    next run would refuse the root, and the group could put files where nginx serves."""
    source = tmp_path / "one.jpg"
    source.write_bytes(jpeg_with_exif(photo(300, 200), quality=85))
    env = {"IMGWARM_ORIGIN_ROOT": str(tmp_path / "var" / "origin"),
           "IMGWARM_MANIFEST_ROOT": str(tmp_path / "var" / "manifest")}
    previous = os.umask(0o002)
    try:  # the quickstart's order: samples first make var/, above the roots
        assert Cli()("samples", str(tmp_path / "var" / "samples")).exit_code == 0
        for _ in range(2):  # the second run takes the folders the first made
            done = Cli()("optimize", str(source), env=env)
            assert done.exit_code == 0, done.stderr
    finally:
        os.umask(previous)
    for folder in [tmp_path / "var", *(tmp_path / "var").rglob("*")]:
        if folder.is_dir():
            assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
