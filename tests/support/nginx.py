"""A real nginx running the config ``imgwarm nginx`` emits for a site, on a free loopback port,
and what it answers; Link headers parsed as browsers read them."""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import parts
from tests.support.cli import Cli
from tests.support.servers import free_port, wait_for
from tests.support.sites import Site


def nginx() -> str:
    """The nginx binary (Debian's is /usr/sbin/nginx, off a user's PATH), or a skip."""
    return parts.binary("nginx", fallback="/usr/sbin/nginx")


def parse_link(value: str) -> tuple[str, dict[str, str]]:
    """One Link header's target and parameters (quoted values unquoted)."""
    target, _, rest = value.partition(";")
    params = {}
    for part in re.findall(r'\s*([^=;\s]+)(?:=("[^"]*"|[^;]*))?;?', rest):
        params[part[0]] = part[1].strip('"')
    return target.strip().strip("<>"), params


@dataclass
class Served:
    site: Site
    port: int
    folder: Path
    pages: Path
    scheme: str = "http"

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def get(self, path: str, method: str = "GET", **headers: str
            ) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(f"{self.base}{path}", method=method, headers=headers)
        unverified = ssl._create_unverified_context()  # the test's own self-signed cert
        try:
            with urllib.request.urlopen(request, timeout=10, context=unverified) as answer:
                headers = {k.lower(): v for k, v in answer.headers.items()}
                return answer.status, headers, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, {k.lower(): v for k, v in error.headers.items()}, b""

    def answers(self) -> bool:
        try:
            return self.get("/")[0] >= 100  # any answer: it listens
        except OSError:  # not listening yet
            return False


def emit(site: Site, *args: str | Path) -> tuple[int, str, str]:
    """``imgwarm nginx ARGS`` with the site's settings: exit code, stdout, stderr."""
    done = Cli()("nginx", *args, env=site.env())
    return done.exit_code, done.stdout, done.stderr


@contextlib.contextmanager
def running(site: Site, folder: Path, *args: str | Path, main: str = "") -> Iterator[Served]:
    """nginx running the config `imgwarm nginx ARGS` emits for ``site``, on a free port;
    ``main``: more directives for nginx.conf's main context."""
    binary = nginx()
    folder.mkdir()
    port = free_port()
    scheme = "https" if "--tls-cert" in args else "http"
    code, _, err = emit(site, *args, "--listen", f"127.0.0.1:{port}",
                        "--access-log", folder / "access.log", "--check",
                        "--out", folder / "imgwarm.conf")
    assert code == 0, err
    user = "user root;\n" if os.geteuid() == 0 else ""  # the tiers are in root's temp folders
    (folder / "nginx.conf").write_text(
        f"{user}{main}pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\nevents {{}}\n"
        f"http {{ include /etc/nginx/mime.types; include {folder}/imgwarm.conf; }}\n")
    server = subprocess.Popen([binary, "-p", str(folder), "-c", str(folder / "nginx.conf"),
                               "-g", "daemon off;"], stderr=subprocess.PIPE)
    try:
        found = Served(site, port, folder, Path(), scheme)
        wait_for(found.answers, "nginx")
        yield found
    finally:
        server.terminate()
        server.wait(timeout=10)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key for 127.0.0.1, for a test's TLS server."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
