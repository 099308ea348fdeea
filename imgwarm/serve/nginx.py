"""The nginx config that serves the variants: RAM tier, then NVMe, then the origin.

Written from the settings (tier roots, origin, layout, log format) and a pages file (each
page's preload Link) by two Jinja2 templates: ``http.conf.j2`` (maps, log format, the S3
upstream: the http level) and ``server.conf.j2`` (the locations). The whole config is a
``server`` holding the second, after the first; a snippet is the two files apart, for the
user's own ``server``. Every value from outside passes through ``confsafe``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from imgwarm.config import Settings
from imgwarm.exceptions import NginxError, SettingsError
from imgwarm.formats import OUTPUTS
from imgwarm.roots import apart, check_root, not_system, stores_roots
from imgwarm.serve.confsafe import bare, quoted, single_quoted
from imgwarm.serve.pages import Page
from imgwarm.store.layout import Layout

PUSH_REMOVED = (1, 25, 1)  # nginx removed HTTP/2 push (http2_push_preload) in 1.25.1
PUSH_COOKIE = "imgwarm_pushed"
# Descriptors nginx's open_file_cache keeps open per worker: each counts against the worker's
# descriptor limit (1024 under systemd unless worker_rlimit_nofile says more) with the
# connections; past it, opens fail and nginx answers 500.
OPEN_FILES = 1000
CA_FILE = "/etc/ssl/certs/ca-certificates.crt"  # Debian's, Ubuntu's and Alpine's CA bundle
# Response headers of S3 (and MinIO, Ceph, R2) that say nothing a visitor needs.
S3_HIDDEN = (
    "x-amz-id-2", "x-amz-request-id", "x-amz-version-id", "x-amz-server-side-encryption",
    "x-amz-storage-class", "x-amz-expiration", "x-amz-restore", "x-amz-replication-status",
    "x-amz-tagging-count", "x-amz-website-redirect-location", "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
    "x-amz-checksum-sha256", "x-amz-checksum-type", "x-amz-mp-parts-count",
    "x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
    "x-amz-object-lock-legal-hold", "x-amz-bucket-region", "x-amz-delete-marker",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-server-side-encryption-bucket-key-enabled",
    "x-amz-id", "x-amz-content-sha256", "x-amz-sdk-checksum-algorithm", "x-amzn-requestid",
    "x-amzn-trace-id", "x-minio-deployment-id", "x-ratelimit-limit", "x-ratelimit-remaining",
    "x-content-type-options", "x-xss-protection", "strict-transport-security", "set-cookie",
    "cache-control", "vary", "accept-ranges")


_FILE = r"/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*"  # a page's file under the site root


HSTS_MAX_AGE = 63072000  # two years, as Mozilla's server-side TLS guidelines give
# Mozilla's "intermediate" TLS profile (guidelines 5.7), for nginx 1.22 and OpenSSL 3: TLS 1.2
# and 1.3, forward-secret AEAD ciphers (DHE ones only where an ssl_dhparam is given).
TLS_PROFILE = (
    "ssl_protocols TLSv1.2 TLSv1.3;",
    "ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"
    "ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:"
    "DHE-RSA-CHACHA20-POLY1305;",
    "ssl_prefer_server_ciphers off;",
    "ssl_session_timeout 1d;",
    "ssl_session_cache shared:imgwarm_tls:10m;  # about 40,000 sessions",
    "ssl_session_tickets off;",
)


@dataclass
class NginxOptions:
    listen: str = "80"
    server_name: str = "_"
    image_prefix: str | None = None  # None: the image_prefix setting
    site_root: Path | None = None
    # only these pages of the site root (URL path -> its file under the root), each an exact
    # location, everything else 404 (the gallery); None: every file under it but dot files
    site_pages: dict[str, str] | None = None
    app: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    hsts: int | None = HSTS_MAX_AGE  # Strict-Transport-Security max-age with TLS; None: none
    reuseport: bool = True
    push: bool = False
    tier_header: bool = False
    open_files: int = OPEN_FILES  # open_file_cache max; 0: no cache
    access_log: str | None = None  # where nginx writes it (default: from access_logs)
    pages: list[Page] = field(default_factory=list)


@dataclass(frozen=True)
class Config:
    http: str  # maps, log format, upstream: the http level
    server: str  # the locations and server-level directives
    whole: str  # one file for http {}: the http part and a server holding the locations


def nginx_version(binary: str = "nginx") -> tuple[int, ...] | None:
    """The version of the nginx at ``binary`` (``nginx -v``), None when there is none."""
    try:
        done = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", done.stderr + done.stdout)
    return tuple(int(n) for n in found.groups()) if found else None


def check_push(version: tuple[int, ...] | None) -> None:
    if version is None:
        raise NginxError("push needs to know the nginx it is for, and `nginx -v` found none "
                         "here; preload (the default) needs no push")
    if version >= PUSH_REMOVED:
        shown = ".".join(map(str, version))
        raise NginxError(f"push: nginx {shown} has no HTTP/2 push (http2_push_preload was "
                         "removed in 1.25.1); the preload Link headers are sent anyway, and "
                         "Chrome (since 106) and Firefox (since 132) ignore push")


def render(settings: Settings, options: NginxOptions, *, snippet: bool = False) -> Config:
    """The config (both parts, and the whole), every outside value checked."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("imgwarm.serve"), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      autoescape=False)  # nginx, not HTML: confsafe does the escaping
    values = _values(settings, options, snippet=snippet)
    http = env.get_template("http.conf.j2").render(**values)
    server = env.get_template("server.conf.j2").render(**values)
    whole = (f"# Written by `imgwarm nginx`: include it in http {{}} after mime.types.\n"
             f"{http}\nserver {{\n{_listen(options)}{_indent(server)}}}\n")
    return Config(http=http, server=server, whole=whole)


def image_prefix(settings: Settings, given: str | None) -> str:
    """The URL path the variants are served under (``given``, else the setting). A given one
    is the setting's value too: checked by its rules (no ``..``), in its words."""
    prefix = settings.updated(image_prefix=given).cache.image_prefix if given else \
        settings.cache.image_prefix
    if not (prefix.startswith("/") and prefix.endswith("/")):
        raise SettingsError(f"image_prefix {prefix!r} must start and end with /")
    return bare(prefix, "image_prefix", r"[A-Za-z0-9._~/-]+")  # as nginx decodes it: no %


def _values(settings: Settings, options: NginxOptions, *, snippet: bool) -> dict[str, Any]:
    cache, store = settings.cache, settings.store
    prefix = image_prefix(settings, options.image_prefix)
    if options.site_root is not None and options.app is not None:
        raise SettingsError("site_root and app: one or the other")
    if options.pages and not snippet and options.site_root is None and options.app is None:
        raise SettingsError("pages: the pages are served by this server: give site_root "
                            "or app (or ask for a snippet, for your own server)")
    # what nginx serves from: roots another user may write (or swap a folder above) would
    # decide what is served under URLs cached for a year
    served = {"the RAM tier (ram_root)": cache.ram_root,
              "the NVMe tier (nvme_root)": cache.nvme_root}
    if store.origin == "local":
        served["the origin (origin_root)"] = store.origin_root
    for name, folder in served.items():  # (root writes the config of a service that runs
        check_root(folder, name, any_owner=os.geteuid() == 0)  # as the roots' owner)
    site: dict[str, Any] | None = None
    if options.site_root is not None:
        # never a store's folder, nor one that holds one: nginx would serve manifests, state
        # and originals as pages; nor /, /etc...
        not_system(options.site_root, "site_root")
        apart({"site_root": options.site_root, **stores_roots(settings)})
        site = {"root": _path(options.site_root, "site_root"), "only": [
            {"path": quoted(page, "site page"), "file": bare(file, "site page file", _FILE)}
            for page, file in (options.site_pages or {}).items()]}
    elif options.app is not None:
        parts = urlsplit(options.app)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SettingsError(f"app {options.app!r} must be an http:// or https:// URL")
        site = {"root": "", "app": bare(options.app, "app"), "only": []}
    log_format = "" if cache.log_format == "combined" else \
        single_quoted(cache.log_format, "log_format")
    return {
        "prefix": prefix, "prefix_re": re.escape(prefix), "name_re": _name_re(settings),
        "levels": store.shard_levels,
        "ram_root": _path(cache.ram_root, "ram_root"),
        "nvme_root": _path(cache.nvme_root, "nvme_root"),
        "origin_root": _path(store.origin_root, "origin_root"),
        "s3": _s3(settings) if store.origin == "s3" else None,
        "site": site, "pages": options.pages, "push": options.push,
        "cookie": PUSH_COOKIE, "tier_header": options.tier_header,
        "log_format": log_format,
        "access_log": _path(Path(options.access_log or _default_log(settings)), "access log"),
        "formats": list(OUTPUTS.values()), "ca_file": CA_FILE,
        "map_hash": _map_hash(options.pages), "snippet": snippet,
        "open_files": _open_files(options.open_files),
        "hsts": None if snippet else _hsts(options),
    }


def _map_hash(pages: list[Page]) -> dict[str, int]:
    """map_hash sizes for these keys where nginx's defaults (64, 2048) would refuse them: an
    element takes 8 bytes and its key rounded up to 8 with 2 more, a bucket one element and
    8 bytes more."""
    longest = max((len(p.path) for p in pages), default=0)
    needed = 16 + -(-(longest + 2) // 8) * 8
    bucket = 1 << (max(needed, 64) - 1).bit_length()
    count = 1 << (max(2 * len(pages), 2048) - 1).bit_length()
    return {"bucket": bucket if bucket > 64 else 0, "max": count if count > 2048 else 0}


def _name_re(settings: Settings) -> str:
    """A variant's path, exactly: the shard folders of the layout, then {slug}.{hash}.{ext}."""
    store = settings.store
    layout = Layout(store.max_dir_entries, store.shard_levels)
    width = -(-layout.bits // 4)
    extensions = "|".join(sorted({f.extension for f in OUTPUTS.values()}))
    return (f"(?:[0-9a-f]{{{width}}}/){{{store.shard_levels}}}(?:[a-z0-9-]+\\.)?"
            f"[0-9a-f]{{{settings.image.hash_length}}}\\.(?:{extensions})")


def _s3(settings: Settings) -> dict[str, Any]:
    store = settings.store
    bucket = store.s3_bucket or ""
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        raise SettingsError(f"s3_bucket {bucket!r} is not an S3 bucket name")
    aws = store.s3_endpoint_url is None  # nginx must name the region boto3 finds by itself
    if aws and not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", store.s3_region or ""):
        raise SettingsError(f"s3_region {store.s3_region!r}: nginx needs the bucket's region "
                            "(e.g. eu-west-1) to reach AWS S3")
    endpoint = store.s3_endpoint_url or f"https://s3.{store.s3_region}.amazonaws.com"
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or \
            parts.path.strip("/") or parts.query or parts.username:
        raise SettingsError(f"s3_endpoint_url {endpoint!r} must be an http(s) URL of a host "
                            "(no path, query or user)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname
    virtual = store.s3_endpoint_url is None  # AWS: the bucket in the host name
    if virtual:
        host = f"{bucket}.{host}"
    path = ("/" if virtual else f"/{bucket}/") + store.s3_prefix
    return {"scheme": parts.scheme, "server": bare(f"{host}:{port}", "s3_endpoint_url"),
            "host": bare(host, "s3 host"), "path": bare(path, "s3_bucket and s3_prefix"),
            "hidden": S3_HIDDEN}


def _open_files(count: int) -> int:
    if not 0 <= count <= 10_000_000:
        raise SettingsError(f"open_files {count}: 0 (no cache) to 10,000,000")
    return count


def _default_log(settings: Settings) -> str:
    for entry in settings.cache.access_logs:
        if not any(c in entry for c in "*?["):
            return entry
    return "/var/log/nginx/imgwarm.access.log"


def _path(path: Path | str, what: str) -> str:
    text = str(Path(path).absolute())
    return bare(text, what)


def _listen(options: NginxOptions) -> str:
    address = bare(options.listen, "listen")
    extra = " reuseport" if options.reuseport else ""
    lines = []
    if options.tls_cert is not None or options.tls_key is not None:
        if options.tls_cert is None or options.tls_key is None:
            raise SettingsError("tls_cert and tls_key go together")
        lines.append(f"listen {address} ssl http2{extra};")
        lines.append(f"ssl_certificate {_path(options.tls_cert, 'tls_cert')};")
        lines.append(f"ssl_certificate_key {_path(options.tls_key, 'tls_key')};")
        lines += TLS_PROFILE
    else:
        lines.append(f"listen {address}{' http2' if options.push else ''}{extra};")
    names = options.server_name.split() or ["_"]
    lines.append("server_name " + " ".join(
        bare(n, "server_name", r"[A-Za-z0-9._*-]+") for n in names) + ";")
    lines.append("server_tokens off;  # no nginx version in headers and error pages")
    hsts = _hsts(options)
    if hsts:  # (and in each location with add_header of its own: they inherit none)
        lines.append(hsts)
    return "".join(f"    {line}\n" for line in lines)


def _hsts(options: NginxOptions) -> str | None:
    """The Strict-Transport-Security header line, with TLS unless turned off."""
    if options.tls_cert is None or options.hsts is None:
        return None
    if not 0 <= options.hsts <= 10 * 365 * 86400:
        raise SettingsError(f"hsts {options.hsts}: a max-age in seconds, 0 to ten years")
    return f'add_header Strict-Transport-Security "max-age={options.hsts}" always;'


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in text.splitlines())


def check(config: Config, *, snippet: bool, listen: str = "127.0.0.1:1",
          binary: str = "nginx") -> None:
    """``nginx -t`` on the config in a minimal nginx.conf; NginxError with nginx's message."""
    if shutil.which(binary) is None:
        raise NginxError(f"checking the config (nginx -t) needs nginx, and there is no "
                         f"{binary!r} on PATH")
    with tempfile.TemporaryDirectory(prefix="imgwarm-nginx-") as folder:
        here = Path(folder)
        if snippet:
            (here / "http.conf").write_text(config.http)
            (here / "server.conf").write_text(config.server)
            body = (f"include {here}/http.conf;\nserver {{ listen {listen}; "
                    f"include {here}/server.conf; }}\n")
        else:
            (here / "imgwarm.conf").write_text(config.whole)
            body = f"include {here}/imgwarm.conf;\n"
        main = here / "nginx.conf"
        main.write_text(main_config(here, body, error_log="stderr"))
        done = subprocess.run([binary, "-t", "-q", "-p", folder, "-c", str(main)],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            message = done.stderr.replace(folder, "<config>").strip()
            raise NginxError(f"nginx -t failed: {message}")


def main_config(here: Path, body: str, *, error_log: str | None = None,
                user: str | None = None) -> str:
    """A minimal nginx.conf in folder ``here`` whose http {} holds ``body`` (after
    mime.types); ``error_log`` defaults to a file in ``here``; ``user``: "NAME GROUP" the
    workers run as (when nginx starts as root)."""
    owner = f"user {bare(user, 'user', r'[A-Za-z0-9._-]+( [A-Za-z0-9._-]+)?')};\n" if user else ""
    return (f"{owner}pid {here}/nginx.pid;\nerror_log {error_log or f'{here}/error.log'};\n"
            f"events {{}}\nhttp {{\ninclude {_mime_types()};\n{body}}}\n")


def _mime_types() -> str:
    for candidate in ("/etc/nginx/mime.types", "/usr/local/nginx/conf/mime.types"):
        if Path(candidate).is_file():
            return candidate
    raise NginxError("no mime.types found next to nginx (/etc/nginx/mime.types)")
