"""Every config `imgwarm nginx` writes is clean under gixy-ng, the maintained nginx config
analyser users run (issue 27): no finding of any severity, for each template variant (a
site's files or an app behind it, TLS with and without HSTS, push, an S3 origin, a prefix,
the gallery's exact pages, and the snippet inside a server of the user's), and each passes
`nginx -t` too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support import parts
from tests.support.nginx import emit, self_signed
from tests.support.sites import Site, make_site

pytestmark = [pytest.mark.integration]
GIXY = Path(sys.executable).with_name("gixy")


def findings(config: Path, folder: Path, server: str | None = None) -> list[dict[str, str]]:
    """gixy-ng's findings on an nginx.conf that includes ``config`` in http {} (a snippet:
    its http part there, and ``server`` holding the server part)."""
    body = f"include {config};" if server is None else \
        f"include {config / 'http.conf'};\n  {server}"
    main = folder / "nginx.conf"
    main.write_text(f"events {{}}\nhttp {{\n  {body}\n}}\n")
    done = subprocess.run([str(GIXY), "-f", "json", str(main)], capture_output=True,
                          text=True, check=False)
    assert done.stdout.strip().startswith("["), done.stdout + done.stderr
    return [{k: f.get(k, "") for k in ("plugin", "severity", "reason")}
            for f in json.loads(done.stdout)]


@pytest.fixture
def site(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    parts.binary("openssl")
    return make_site(settings, tmp_path, ram, count=1)


def variants(site: Site, tmp_path: Path) -> dict[str, list[str | Path]]:
    www = tmp_path / "www"
    www.mkdir(exist_ok=True)
    cert, key = self_signed(tmp_path)
    manifest = site.manifests()[0]
    pages = tmp_path / "pages.json"
    pages.write_text(json.dumps({"/": [manifest.key]}))
    tls: list[str | Path] = ["--tls-cert", cert, "--tls-key", key]
    found: dict[str, list[str | Path]] = {
        "site": ["--site-root", www, "--pages", pages],
        "app": ["--app", "http://127.0.0.1:8000", "--pages", pages],
        "images only": [],
        "prefix and tier header": ["--site-root", www, "--image-prefix", "/img/",
                                   "--tier-header"],
        "tls": ["--site-root", www, "--pages", pages, *tls],
        "tls, hsts a year": ["--site-root", www, *tls, "--hsts", "31536000"],
    }
    from imgwarm.serve.nginx import PUSH_REMOVED, nginx_version

    version = nginx_version(shutil.which("nginx") or "/usr/sbin/nginx")
    if version is not None and version < PUSH_REMOVED:
        found["tls and push"] = ["--site-root", www, "--pages", pages, "--push", *tls]
    return found


def test_every_config_is_clean_under_gixy_and_nginx_t(site: Site, tmp_path: Path) -> None:
    parts.binary("nginx", fallback="/usr/sbin/nginx")
    checked = []
    for name, args in variants(site, tmp_path).items():
        folder = tmp_path / name.replace(" ", "-").replace(",", "")
        folder.mkdir()
        code, _, err = emit(site, *args, "--check", "--out", folder / "imgwarm.conf")
        assert code == 0, f"{name}: {err}"
        assert findings(folder / "imgwarm.conf", folder) == [], name
        checked.append(name)
    assert len(checked) >= 6


def test_the_snippet_is_clean_in_a_users_server(site: Site, tmp_path: Path) -> None:
    """The snippet leaves server-level choices to the user's server (here: tokens off), and
    its own locations add nothing gixy-ng finds."""
    folder = tmp_path / "snippet"
    code, _, err = emit(site, "--snippet", "--check", "--out", folder)
    assert code == 0, err
    server = (f"server {{ listen 8080; server_tokens off; "
              f"include {folder / 'server.conf'}; location / {{ return 404; }} }}")
    assert findings(folder, tmp_path, server) == []


@pytest.mark.parametrize("choice", [["--no-hsts"], ["--hsts", "86400"]])
def test_less_hsts_with_tls_is_what_gixy_finds(choice: list[str], site: Site,
                                               tmp_path: Path) -> None:
    """The check is real: no HSTS, or a max-age under six months (a site rolling it out),
    is what gixy-ng finds; the user's choice, said in the docs."""
    cert, key = self_signed(tmp_path)
    folder = tmp_path / "less-hsts"
    folder.mkdir()
    code, _, err = emit(site, "--tls-cert", cert, "--tls-key", key, *choice, "--check",
                        "--out", folder / "imgwarm.conf")
    assert code == 0, err
    assert [f["plugin"] for f in findings(folder / "imgwarm.conf", folder)] == ["hsts_header"]
