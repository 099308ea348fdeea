"""``imgwarm nginx``: write the nginx config that serves the tiers, and prove it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, load

HTTP_FILE, SERVER_FILE = "imgwarm-http.conf", "imgwarm-server.conf"


@click.command()
@click.option("--pages", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON or TOML file: page path -> the sources it shows, the first being its "
              "largest above-the-fold image; each page gets that image's preload Link.")
@click.option("--site-root", type=click.Path(file_okay=False, path_type=Path),
              help="Serve the site's pages as static files from this folder.")
@click.option("--app", metavar="URL", help="Or proxy the pages to the web app at this URL.")
@click.option("--listen", default="80", show_default=True, metavar="ADDR",
              help="nginx listen address (port, or address:port).")
@click.option("--server-name", default="_", show_default=True, metavar="NAME")
@click.option("--image-prefix", metavar="PATH",
              help="URL path the variants are served under (default: the image_prefix "
              "setting, /: a variant's path is its URL path).")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path),
              help="Certificate: listen with TLS and HTTP/2.")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-reuseport", is_flag=True,
              help="Leave reuseport off the listen (another server has this address).")
@click.option("--access-log", metavar="PATH",
              help="Where nginx writes the access log `imgwarm warm` reads (default: the "
              "first plain path of the access_logs setting).")
@click.option("--sizes", default="100vw", show_default=True,
              help="imagesizes of the preload Links.")
@click.option("--snippet", is_flag=True,
              help="Two files for your own server: the http-level part (maps, log format) "
              "and the server-level part (locations); --out names their folder.")
@click.option("--push", is_flag=True,
              help="Also push each page's image over HTTP/2 on a first visit (cookie-gated); "
              "only for an nginx older than 1.25.1.")
@click.option("--tier-header", is_flag=True,
              help="Add X-Cache-Tier: ram|nvme|origin to image responses.")
@click.option("--open-files", type=int, metavar="N",
              help="Descriptors nginx keeps open per worker (open_file_cache max; default "
              "1000; 0: none). "
              "Keep it under the worker's limit (worker_rlimit_nofile) less the connections.")
@click.option("--check", is_flag=True, help="Run `nginx -t` on the result before writing it.")
@click.option("--out", type=click.Path(path_type=Path),
              help="Write here (a file; a folder with --snippet). Default: standard output.")
@click.pass_context
def nginx(ctx: click.Context, /, pages: Path | None, snippet: bool, check: bool,
          out: Path | None, sizes: str, **options: Any) -> None:
    """Write the nginx config that serves the variants: the RAM tier, then NVMe, then the
    origin (a folder, or S3 through proxy_pass), with immutable caching, each page's preload
    Link (from --pages) and the access log `imgwarm warm` reads.

    By default one file to include in nginx's http {} after mime.types: a whole server for
    the images and the site's pages (--site-root or --app). Nothing is written when anything
    is wrong (a hostile pages file, a value that cannot go into a config, nginx -t failing).

    Exit status: 0 written, 1 nginx -t failed or push refused, 2 usage errors.
    """
    from imgwarm.exceptions import ImgwarmError, SettingsError
    from imgwarm.serve.nginx import (
        OPEN_FILES,
        NginxOptions,
        check_push,
        image_prefix,
        nginx_version,
        render,
    )
    from imgwarm.serve.nginx import check as nginx_check
    from imgwarm.serve.pages import preloads, read_pages
    from imgwarm.store import Stores
    from imgwarm.text import printable

    settings = load(ctx)
    if snippet and out is None:
        raise click.UsageError("--snippet writes two files: give --out FOLDER")
    try:
        prefix = image_prefix(settings, options["image_prefix"])
        found = preloads(read_pages(pages), Stores.for_settings(settings.store),
                         prefix=prefix, sizes=sizes) if pages is not None else []
        if options["push"]:
            check_push(nginx_version())
        config = render(settings, NginxOptions(
            listen=options["listen"], server_name=options["server_name"],
            image_prefix=options["image_prefix"], site_root=options["site_root"],
            app=options["app"], tls_cert=options["tls_cert"], tls_key=options["tls_key"],
            reuseport=not options["no_reuseport"], push=options["push"],
            tier_header=options["tier_header"], access_log=options["access_log"],
            open_files=OPEN_FILES if options["open_files"] is None else options["open_files"],
            pages=found), snippet=snippet)
        if check:
            nginx_check(config, snippet=snippet)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None
    except ImgwarmError as error:
        click.echo(printable(f"nginx FAILED: {error}"), err=True)
        ctx.exit(EXIT_FAILED)
    if out is None:
        click.echo(config.whole, nl=False)
    elif snippet:
        out.mkdir(parents=True, exist_ok=True)
        _write(out / HTTP_FILE, config.http)
        _write(out / SERVER_FILE, config.server)
        click.echo(f"wrote {out / HTTP_FILE} (include in http {{}}) and {out / SERVER_FILE} "
                   "(include in your server {})", err=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        _write(out, config.whole)
        click.echo(f"wrote {out} (include in http {{}} after mime.types)", err=True)
    ctx.exit(EXIT_OK)


def _write(path: Path, text: str) -> None:
    """Whole or not at all: nginx may be reloaded at any moment."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
