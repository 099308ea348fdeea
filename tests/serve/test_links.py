"""Links planted under the origin or a tier are refused by the emitted config, in a real nginx
(imgwarm never places one: a variant-shaped link was put there by someone else, and would
serve whatever it points at for a year); the real variants still answer."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.store import Stores
from tests.support.nginx import running
from tests.support.sites import Site, make_site

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SECRET = b"readable by nginx, outside every root"


def plant(root: Path, path: str, target: Path) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, root / path)


@pytest.mark.parametrize("prefix", ["/", "/img/"])
def test_a_planted_link_is_refused_and_the_variants_answer(
        settings: Settings, tmp_path: Path, ram: Path, prefix: str) -> None:
    site: Site = make_site(settings, tmp_path, ram, count=2, ram_budget="40K")
    site.warm()
    stores = Stores.for_settings(site.settings.store)
    origin = site.settings.store.origin_root
    nvme, ram_root = site.settings.cache.nvme_root, site.settings.cache.ram_root
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    # real variants in RAM (and NVMe and the origin): the second's RAM file becomes a link
    real, shadowed = sorted(site.in_tier("ram"))[:2]
    variants = [*sorted(site.in_tier("nvme") - {shadowed})[:4], real]
    os.unlink(ram_root / shadowed)
    plant(ram_root, shadowed, secret)

    def shaped(name: str) -> str:
        digest = hashlib.sha256(name.encode()).hexdigest()[:site.settings.image.hash_length]
        return str(stores.path_of(f"{name}.{digest}.webp"))

    links = {
        shaped("in-origin"): (origin, secret),  # a file outside every root
        shaped("in-nvme"): (nvme, secret),
        shaped("in-ram"): (ram_root, origin / real),  # another root's file
    }
    for path, (root, target) in links.items():
        plant(root, path, target)
    # a shard folder that is itself a link, to a folder outside holding a variant's name
    folder_path = next(p for p in map(shaped, (f"by-folder-{n}" for n in range(99)))
                       if not (origin / Path(p).parts[0]).exists())
    top, middle, bottom, name = Path(folder_path).parts
    (tmp_path / "outside" / bottom).mkdir(parents=True)
    (tmp_path / "outside" / bottom / name).write_bytes(SECRET)
    (origin / top).mkdir()
    os.symlink(tmp_path / "outside", origin / top / middle)
    links[folder_path] = (origin, tmp_path / "outside")

    with running(site, tmp_path / "nginx", "--tier-header", "--image-prefix", prefix) as served:
        for path in links:
            status, _, body = served.get(f"{prefix}{path}")
            assert status == 404 and SECRET not in body, (path, status)
        for path in variants:
            status, _, body = served.get(f"{prefix}{path}")
            assert status == 200 and body == (origin / path).read_bytes(), path
        # a link in RAM in front of a real file in NVMe: the link is a miss, NVMe answers
        status, headers, body = served.get(f"{prefix}{shadowed}")
        assert (status, headers.get("x-cache-tier")) == (200, "nvme")
        assert body == (origin / shadowed).read_bytes()
