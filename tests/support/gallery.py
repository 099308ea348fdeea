"""A gallery page served as users serve it: `imgwarm gallery` writes the page for some
manifests, `imgwarm serve` runs nginx with the emitted config (RAM tier, NVMe, origin), both
as real processes with the settings in their environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from tests.support.servers import free_port, wait_for

IMGWARM = Path(sys.executable).parent / "imgwarm"
PASSED = ("origin_root", "manifest_root", "nvme_root", "ram_root", "cache_state", "widths",
          "formats")


def gallery_env(settings: Settings) -> dict[str, str]:
    flat = settings.flat()
    found = {f"IMGWARM_{n.upper()}": ",".join(map(str, flat[n])) if isinstance(flat[n], list)
             else str(flat[n]) for n in PASSED}
    return {**{k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}, **found}


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def serving(env: dict[str, str], www: Path) -> Iterator[int]:
    """`imgwarm serve` of the gallery folder ``www``: its port. Stopped with Ctrl-C as a
    user stops it."""
    port = free_port()
    server = subprocess.Popen([str(IMGWARM), "serve", "--gallery", str(www), "--port",
                               str(port)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: listening(port) or server.poll() is not None, "imgwarm serve")
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        yield port
        server.send_signal(signal.SIGINT)  # Ctrl-C
        assert server.wait(timeout=20) == 0
    finally:
        if server.poll() is None:
            server.kill()


@contextmanager
def served_gallery(settings: Settings, manifests: list[Manifest], www: Path) -> Iterator[str]:
    """The gallery of ``manifests`` written to ``www`` and served: its URL. Stopped with
    Ctrl-C as a user stops it, which must stop nginx too."""
    env = gallery_env(settings)
    written = subprocess.run([str(IMGWARM), "gallery", *(m.key for m in manifests),
                              "--out", str(www)], env=env, capture_output=True, text=True,
                             check=False)
    assert written.returncode == 0, written.stderr
    with serving(env, www) as port:
        yield f"http://127.0.0.1:{port}/"
    assert not listening(port)  # nginx stopped with it: workers hold the socket too
