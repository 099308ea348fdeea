"""The emitted nginx config, in a real nginx: tiers filled by `imgwarm warm` from a local
origin, and what nginx really answered."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.serve.nginx import PUSH_REMOVED, NginxError, check_push, nginx_version
from tests.support import parts
from tests.support.nginx import Served, emit, parse_link, running, self_signed
from tests.support.sites import Site, make_site

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ODD_PAGE = "/annonces/café crème/"  # sent percent-encoded by browsers
LONG_PAGE = "/ads/" + "-".join(["a-long-slug-for-a-classified-ad"] * 6) + "/"  # > 46 chars


@pytest.fixture
def served(settings: Settings, tmp_path: Path, ram: Path) -> Iterator[Served]:
    site = make_site(settings, tmp_path, ram, count=3, ram_budget="40K")
    site.warm()
    pages_root = tmp_path / "www"
    for folder in ("", "ads/1", "ads/2", ODD_PAGE.strip("/"), LONG_PAGE.strip("/")):
        (pages_root / folder).mkdir(parents=True, exist_ok=True)
        (pages_root / folder / "index.html").write_text(f"<h1>{folder or 'home'}</h1>")
    (pages_root / ".env").write_text("SECRET=1")
    manifests = sorted(site.manifests(), key=lambda m: m.key)
    pages = tmp_path / "pages.json"
    pages.write_text(json.dumps({"/": [manifests[0].key], "/ads/1/": [manifests[1].key],
                                 ODD_PAGE: [manifests[2].key], LONG_PAGE: [manifests[0].key]}))
    with running(site, tmp_path / "nginx", "--pages", pages, "--site-root", pages_root,
                 "--tier-header") as found:
        found.pages = pages
        yield found


def _variant_in(site: Site, tier: str, not_in: str | None = None, ext: str = ".webp") -> str:
    found = site.in_tier(tier) - (site.in_tier(not_in) if not_in else set())
    return sorted(p for p in found if p.endswith(ext))[0]


def test_each_tier_answers_with_immutable_caching_and_its_type(served: Served) -> None:
    site = served.site
    hot = _variant_in(site, "ram")
    cold = _variant_in(site, "nvme", not_in="ram")
    gone = _variant_in(site, "nvme", not_in="ram", ext=".jpg")
    (site.settings.cache.nvme_root / gone).unlink()  # only the origin has it now
    for path, tier, media in ((hot, "ram", "image/webp"), (cold, "nvme", "image/webp"),
                              (gone, "origin", "image/jpeg")):
        status, headers, body = served.get(f"/{path}")
        assert (status, headers.get("x-cache-tier"), headers["content-type"]) == \
            (200, tier, media), path
        assert headers["cache-control"] == "public, max-age=31536000, immutable"
        assert body == (site.settings.store.origin_root / path).read_bytes()
        # no version given away; no HSTS over plain HTTP (browsers ignore it there)
        assert headers["server"] == "nginx" and "strict-transport-security" not in headers
    status, headers, _ = served.get(f"/{hot}", method="POST")
    assert status in (403, 405)
    status, headers, body = served.get("/no/such/page")
    assert status == 404 and headers["server"] == "nginx" and b"nginx/" not in body


def test_a_page_gets_its_preload_link_and_an_image_does_not(served: Served) -> None:
    manifests = sorted(served.site.manifests(), key=lambda m: m.key)
    pages = {"/": manifests[0], "/ads/1/": manifests[1],
             urllib.parse.quote(ODD_PAGE): manifests[2], LONG_PAGE: manifests[0]}
    for page, manifest in pages.items():
        status, headers, body = served.get(page)  # answered by index.html: $uri changes
        assert status == 200 and body.startswith(b"<h1>"), page
        href, params = parse_link(headers["link"])
        webp = sorted((v for v in manifest.variants if v.format == "webp"),
                      key=lambda v: v.width)
        srcset = [entry.split() for entry in params["imagesrcset"].split(", ")]
        assert srcset == [[f"/{v.path}", f"{v.width}w"] for v in webp], page  # no AVIF, JPEG
        assert href == next(f"/{v.path}" for v in webp if v.width >= 640), page
        assert (params["rel"], params["as"], params["type"], params["imagesizes"],
                params["fetchpriority"]) == ("preload", "image", "image/webp", "100vw", "high")
        assert served.get(href)[0] == 200  # what it names is served
        assert served.get(f"{page}?q=1")[1].get("link") == headers["link"]  # any query
    status, headers, _ = served.get(f"/{manifests[0].variants[0].path}")
    assert status == 200 and "link" not in headers  # never on images
    status, headers, _ = served.get("/ads/2/")
    assert status == 200 and "link" not in headers  # a page not in the pages file


def test_variants_under_an_image_prefix(served: Served, tmp_path: Path) -> None:
    site = served.site
    hot = _variant_in(site, "ram")
    cold = _variant_in(site, "nvme", not_in="ram", ext=".jpg")
    with running(site, tmp_path / "prefixed", "--image-prefix", "/img/",
                 "--tier-header") as prefixed:
        for path, tier in ((hot, "ram"), (cold, "nvme")):
            status, headers, body = prefixed.get(f"/img/{path}")
            assert (status, headers.get("x-cache-tier")) == (200, tier), path
            assert body == (site.settings.store.origin_root / path).read_bytes()
        for path in (f"/{hot}", f"/img/{hot}.bak", "/img/.imgwarm-tier", "/img/",
                     f"/img/img/{hot}", f"/imgx/{hot}"):
            assert prefixed.get(path)[0] == 404, path


def test_only_hashed_variant_names_are_served(served: Served) -> None:
    site = served.site
    hot = _variant_in(site, "ram")
    folder = site.settings.cache.ram_root / Path(hot).parent
    (folder / ".tmp-0123.part").write_bytes(b"partial")
    (folder / "notes.txt").write_bytes(b"not a variant")
    (folder / f"{Path(hot).name}.bak").write_bytes(b"a backup")
    (folder / Path(hot).name.replace(".webp", ".WEBP")).write_bytes(b"another case")
    for path in ("/.imgwarm-tier", f"/{Path(hot).parent}/.tmp-0123.part",
                 f"/{Path(hot).parent}/notes.txt", "/.env", f"/{hot}.bak",
                 f"/{hot.replace('.webp', '.WEBP')}"):
        assert served.get(path)[0] == 404, path
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/a/../../etc/passwd"):
        status, _, body = served.get(path)
        assert status in (400, 404) and b"root:" not in body, path


def test_open_file_cache_stays_within_the_descriptor_limit(served: Served,
                                                           tmp_path: Path) -> None:
    site = served.site
    paths = sorted(site.in_tier("nvme"))
    tight = "worker_processes 1;\nworker_rlimit_nofile 24;\n"  # a few more than nginx needs

    def answers(folder: str, *args: str) -> list[int]:
        with running(site, tmp_path / folder, *args, main=tight) as limited:
            return [limited.get(f"/{path}")[0] for path in paths]

    assert set(answers("many", "--open-files", "1000")) > {200}  # the limit binds: 500s
    assert set(answers("few", "--open-files", "4")) == {200}
    assert set(answers("none", "--open-files", "0")) == {200}


def test_nginx_logs_what_warm_reads(served: Served) -> None:
    hot = _variant_in(served.site, "nvme", not_in="ram")
    for _ in range(5):
        assert served.get(f"/{hot}")[0] == 200
    report = served.site.warm(access_logs=[str(served.folder / "access.log")])
    assert report.requests_to_variants == 5 and report.malformed_lines == 0


def test_the_snippet_passes_nginx_t(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "snippet"
    code, _, err = emit(served.site, "--snippet", "--pages", served.pages, "--check",
                        "--out", out)
    assert code == 0, err
    assert "location @imgwarm_nvme" in (out / "imgwarm-server.conf").read_text()
    assert "map $imgwarm_page $imgwarm_preload" in (out / "imgwarm-http.conf").read_text()


def test_hostile_pages_are_escaped_or_refused(served: Served, tmp_path: Path) -> None:
    site = served.site
    key = site.manifests()[0].key
    odd = "/a'b;(c)=d,e!&@:+*\"{x} ü\\y/"  # quotes, braces, semicolons, space, backslash
    www = tmp_path / "odd-www"
    (www / odd.strip("/")).mkdir(parents=True)
    (www / odd.strip("/") / "index.html").write_text("<h1>odd</h1>")
    escaped = tmp_path / "escaped.json"
    escaped.write_text(json.dumps({odd: [key]}))
    with running(site, tmp_path / "odd-nginx", "--pages", escaped, "--site-root", www) as odd_nginx:
        status, headers, body = odd_nginx.get(urllib.parse.quote(odd, safe="/;'()=,!&@:+*"))
        assert (status, body) == (200, b"<h1>odd</h1>")
        assert parse_link(headers["link"])[1]["rel"] == "preload"  # decoded, as nginx sent it
    refused = tmp_path / "refused.conf"
    hostile = tmp_path / "hostile.json"
    for text in [json.dumps({page: [key]}) for page in (
            "/a$host", "/a\nb", "/a\x00b", "/a\u202eb", "/a#b", "/a?b", "/a\udcffb",
            "/" + "x" * 3000, "relative")] + [
            json.dumps({"/": ["a\x00b"]}), json.dumps({"/": ["a\udcffb"]}),
            json.dumps({"/About": [key], "/about": [key]}),  # one to nginx's map
            f'{{"/": ["{key}"], "/": ["{key}"]}}', "[]", "{", '{"/": []}']:
        hostile.write_text(text)
        code, _, err = emit(site, "--pages", hostile, "--site-root", www, "--out", refused)
        assert code == 1 and "pages file" in err and "Traceback" not in err, text[:60]
        assert not refused.exists()
    hostile.write_text(json.dumps({"/": [key]}))
    for sizes in ('100vw", <https://evil/x.js>; rel=preload; as=script; x="', "1" * 300):
        code, _, err = emit(site, "--pages", hostile, "--site-root", www, "--sizes", sizes,
                            "--out", refused)
        assert code == 2 and "sizes" in err and not refused.exists()
    for option, value in (("--server-name", "a.com;"), ("--server-name", "b\udcff"),
                          ("--listen", "80; include /etc/passwd"), ("--app", "http://x/$a")):
        code, _, err = emit(site, option, value, "--out", refused)
        named = option.removeprefix("--").replace("-", "_")  # the option's name, not the flag
        assert code == 2 and named in err and not refused.exists(), (option, value)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"/": ["no/such/source.jpg"]}))
    code, _, err = emit(site, "--pages", missing, "--site-root", www)
    assert code == 1 and "no manifest for source 'no/such/source.jpg'" in err


def test_push_is_refused_where_nginx_has_none() -> None:
    check_push((1, 22, 1))
    for version in ((1, 25, 1), (1, 27, 0), None):
        with pytest.raises(NginxError, match="push"):
            check_push(version)


def test_an_s3_origin_serves_variants_and_nothing_else(settings: Settings, tmp_path: Path,
                                                       ram: Path, s3_server: object) -> None:
    bucket = s3_server.new_bucket()  # type: ignore[attr-defined]
    site = make_site(settings, tmp_path, ram, count=2, origin="s3", s3_bucket=bucket,
                     s3_endpoint_url=s3_server.endpoint,  # type: ignore[attr-defined]
                     s3_region="us-east-1")
    client = s3_server.client  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="uploads/original.jpg", Body=b"the original")
    # nginx reads anonymously: the bucket lets anyone read what is in shard folders (variants),
    # nothing else (originals, manifests), as the README's policy says.
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket}/??/??/??/*"}]}))
    keys = set(s3_server.keys(bucket))  # type: ignore[attr-defined]
    variant = sorted(k for k in keys if k.endswith(".webp"))[0]
    manifest = sorted(k for k in keys if k.startswith(".imgwarm/manifests/"))[0]
    with running(site, tmp_path / "nginx", "--tier-header") as served:  # tiers empty
        status, headers, body = served.get(f"/{variant}")
        assert (status, headers.get("x-cache-tier"), headers["content-type"]) == \
            (200, "origin", "image/webp")
        assert headers["cache-control"] == "public, max-age=31536000, immutable"
        assert not [h for h in headers if h.startswith(("x-amz", "x-minio"))], headers
        assert body == client.get_object(Bucket=bucket, Key=variant)["Body"].read()
        assert served.get(f"/{variant}", method="HEAD")[0] == 200
        missing = variant.replace(variant.rsplit(".", 2)[1], "0" * 16)
        for path in (missing, "uploads/original.jpg", manifest, ".imgwarm/manifests/",
                     "", "?list-type=2", f"{variant}?acl"):
            status, headers, body = served.get(f"/{path}")
            assert status == 404 or (path == f"{variant}?acl" and body.startswith(b"RIFF")), \
                path
            assert b"ListBucketResult" not in body and b"<Error>" not in body, path


def _pushed(served: Served, page: str, *headers: str) -> list[str]:
    """The paths nginx pushed on one h2 visit of ``page``: `nghttp -ans` marks them with *."""
    nghttp = parts.binary("nghttp", "nghttp2-client")
    args = [nghttp, "-ans", f"{served.base}{page}"]
    for header in headers:
        args += ["-H", header]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\s*\d+\s+\+\S+\s+(\*?)\s*\+\S+\s+\S+\s+(\d{3})\s+\S+\s+(\S+)$",
                      done.stdout, re.MULTILINE)
    assert ("", "200", page) in rows, done.stdout  # it spoke h2 and the page was answered
    return [path for star, code, path in rows if star == "*" and code == "200"]


def test_push_on_a_first_visit_and_none_with_the_cookie(served: Served, tmp_path: Path) -> None:
    version = nginx_version()
    if version is None or version >= PUSH_REMOVED:
        parts.missing(f"an nginx with HTTP/2 push (before 1.25.1: Debian 12's 1.22), "
                      f"found {version}")
    cert, key = self_signed(tmp_path)
    manifests = sorted(served.site.manifests(), key=lambda m: m.key)
    with running(served.site, tmp_path / "push-nginx", "--pages", served.pages, "--site-root",
                 served.folder.parent / "www", "--push", "--tls-cert", cert,
                 "--tls-key", key) as pushing:
        status, headers, _ = pushing.get("/ads/1/")
        assert status == 200 and "imgwarm_pushed=1" in headers["set-cookie"]
        # TLS: Mozilla's intermediate profile and two years of HSTS, on pages and images
        assert headers["strict-transport-security"] == "max-age=63072000"
        assert headers["server"] == "nginx"
        href, _ = parse_link(headers["link"])
        assert _pushed(pushing, "/ads/1/") == [href]  # the page's image, once
        assert href == next(f"/{v.path}" for v in sorted(
            manifests[1].variants, key=lambda v: v.width)
            if v.format == "webp" and v.width >= 640)
        assert _pushed(pushing, "/ads/1/", "cookie: a=b; imgwarm_pushed=1") == []
        _, again, _ = pushing.get("/ads/1/", Cookie="imgwarm_pushed=1")
        target, params = parse_link(again["link"])  # still preloaded, just not pushed
        assert (target, params["rel"], "nopush" in params, params["imagesrcset"]) == \
            (href, "preload", True, parse_link(headers["link"])[1]["imagesrcset"])
        assert _pushed(pushing, "/ads/2/") == []  # a page without an image of its own
        assert _pushed(pushing, f"{href}") == []  # never from an image


def _handshake(served: Served, *flags: str) -> bool:
    """Whether a TLS handshake with these `openssl s_client` flags succeeds."""
    done = subprocess.run([parts.binary("openssl"), "s_client", "-connect",
                           f"127.0.0.1:{served.port}", "-servername", "127.0.0.1", *flags],
                          input="", capture_output=True, text=True, timeout=30, check=False)
    return done.returncode == 0 and "Cipher is (NONE)" not in done.stdout


def test_tls_is_mozillas_intermediate_profile_with_hsts(served: Served, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with running(served.site, tmp_path / "tls-nginx", "--site-root",
                 served.folder.parent / "www", "--tls-cert", cert, "--tls-key", key) as tls:
        image = f"/{_variant_in(served.site, 'nvme')}"
        for path in ("/", image):  # a page, and an image location with headers of its own
            status, headers, _ = tls.get(path)
            assert status == 200 and headers["strict-transport-security"] == "max-age=63072000"
            assert headers["server"] == "nginx"
        assert _handshake(tls, "-tls1_2") and _handshake(tls, "-tls1_3")
        # TLS 1.1 and 1.0 refused by the server (the client allowed to offer them)
        assert not _handshake(tls, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        assert not _handshake(tls, "-tls1", "-cipher", "DEFAULT@SECLEVEL=0")
        # a weak cipher (CBC with SHA-1) is refused over TLS 1.2
        assert not _handshake(tls, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA")
