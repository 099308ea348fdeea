"""``imgwarm nginx``, ``picture``, ``gallery`` and ``serve``: the config that serves the
tiers, the tags that ask for the right file, and a page that shows both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, failure_line, json_text, load
from imgwarm.cli.setting import SettingOption
from imgwarm.text import printable

HTTP_FILE, SERVER_FILE = "imgwarm-http.conf", "imgwarm-server.conf"


@command()
@click.option("--pages", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON or TOML file: page path -> the sources it shows, the first being its "
              "largest above-the-fold image; each page gets that image's preload Link.")
@click.option("--site-root", type=click.Path(file_okay=False, path_type=Path),
              help="Serve the site's pages as static files from this folder.")
@click.option("--app", metavar="URL", help="Or proxy the pages to the web app at this URL.")
@click.option("--listen", default="80", show_default=True, metavar="ADDR",
              help="nginx listen address (port, or address:port).")
@click.option("--server-name", default="_", show_default=True, metavar="NAME")
@click.option("--image-prefix", metavar="PATH", cls=SettingOption)
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path),
              help="Certificate: listen with TLS and HTTP/2.")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--hsts", type=click.IntRange(0, 10 * 365 * 86400), metavar="SECONDS",
              help="With TLS: the Strict-Transport-Security max-age (default two years, "
              "63072000; 0 tells browsers to forget it).")
@click.option("--no-hsts", is_flag=True,
              help="With TLS: send no Strict-Transport-Security header (leave it to the "
              "site, or to a proxy in front).")
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
    from imgwarm.serve.nginx import (
        HSTS_MAX_AGE,
        OPEN_FILES,
        NginxOptions,
        check_push,
        image_prefix,
        nginx_version,
        render,
    )
    from imgwarm.serve.nginx import check as nginx_check
    from imgwarm.serve.pages import preloads, read_pages
    from imgwarm.serve.written import write_whole
    from imgwarm.store import Stores

    # --image-prefix is the setting: loaded as one, so that its rules apply (no "..")
    settings = load(ctx, image_prefix=options.pop("image_prefix"))
    if snippet and out is None:
        raise click.UsageError("--snippet writes two files: give --out FOLDER")
    prefix = image_prefix(settings, None)
    found = preloads(read_pages(pages), Stores.for_settings(settings.store),
                     prefix=prefix, sizes=sizes) if pages is not None else []
    if options["push"]:
        check_push(nginx_version())
    if options["no_hsts"] and options["hsts"] is not None:
        raise click.UsageError("--hsts and --no-hsts: one or the other")
    config = render(settings, NginxOptions(
        listen=options["listen"], server_name=options["server_name"],
        site_root=options["site_root"],
        app=options["app"], tls_cert=options["tls_cert"], tls_key=options["tls_key"],
        hsts=None if options["no_hsts"] else (
            HSTS_MAX_AGE if options["hsts"] is None else options["hsts"]),
        reuseport=not options["no_reuseport"], push=options["push"],
        tier_header=options["tier_header"], access_log=options["access_log"],
        open_files=OPEN_FILES if options["open_files"] is None else options["open_files"],
        pages=found), snippet=snippet)
    if check:
        nginx_check(config, snippet=snippet)
    if out is None:
        click.echo(config.whole, nl=False)
    elif snippet:
        out.mkdir(parents=True, exist_ok=True)
        write_whole(out / HTTP_FILE, config.http)
        write_whole(out / SERVER_FILE, config.server)
        click.echo(f"wrote {out / HTTP_FILE} (include in http {{}}) and {out / SERVER_FILE} "
                   "(include in your server {})", err=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_whole(out, config.whole)
        click.echo(f"wrote {out} (include in http {{}} after mime.types)", err=True)
    ctx.exit(EXIT_OK)


@command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--sizes", default="100vw", show_default=True,
              help="The slot's width: a sizes attribute ('(max-width: 600px) 100vw, 50vw'). "
              "Lazy images get 'auto, ' before it (the laid-out width, where supported).")
@click.option("--alt", help="Alternative text (default: the description; alt=\"\" when none).")
@click.option("--eager", is_flag=True,
              help="The hero: loading=eager, fetchpriority=high, and the format its preload "
              "Link names first (so preload and image are one request).")
@click.option("--low", is_flag=True,
              help="Below the fold on small screens but maybe on screen on large ones: "
              "fetchpriority=low, so that the browser does not raise it to high when it is "
              "on screen and its bytes wait for the LCP's.")
@click.option("--class", "css_class", metavar="NAMES", help="class attribute of the <img>.")
@click.option("--base-url", metavar="URL",
              help="Where the variants are served: a path from / or an http(s) URL "
              "(default: the image_prefix setting).")
@click.option("--csp", is_flag=True,
              help="For a page whose Content-Security-Policy allows no inline styles: the "
              "placeholder as a class, its CSS rule printed after the tag (in --json: css), "
              "for the page's stylesheet.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object a source: key, html (and css with --csp).")
@click.pass_context
def picture(ctx: click.Context, /, sources: tuple[str, ...], sizes: str, alt: str | None,
            eager: bool, low: bool, css_class: str | None, base_url: str | None, csp: bool,
            as_json: bool) -> None:
    """Print the <picture> tag of each SOURCE (a file that was optimized, or a manifest key):
    AVIF and WebP <source>s and a JPEG <img> with every width in srcset, width and height
    (no layout shift), alt from the description, lazy loading, and the placeholder as the
    image's background (no script).

    Exit status: 0 printed, 1 a source has no manifest or cannot make a safe tag (the others
    are printed), 2 usage errors (a wrong option: nothing printed).
    """
    from imgwarm.exceptions import ImgwarmError
    from imgwarm.serve.nginx import image_prefix
    from imgwarm.serve.pages import find_manifest
    from imgwarm.serve.picture import check_options, fallback_note, placeholder_rule
    from imgwarm.serve.picture import picture as render
    from imgwarm.store import Stores
    from imgwarm.store.format import READ

    if eager and low:
        raise click.UsageError("--eager and --low: the hero is loaded first, at high priority; "
                               "give one of them")
    settings = load(ctx)
    # once, before any source: a wrong option is a usage error (SettingsError), not N failures
    base = check_options(sizes=sizes, css_class=css_class,
                         base_url=base_url or image_prefix(settings, None))
    stores = Stores.for_settings(settings.store)
    stores.check(READ)  # a store this code may not read: one line, not one a source
    failed = 0
    for source in sources:
        try:
            manifest = find_manifest(stores, source)
            if manifest is None:
                raise ImgwarmError(f"{source}: no manifest (not optimized yet, or another "
                                   "manifest root)")
            html = render(manifest, sizes=sizes, alt=alt, eager=eager, css_class=css_class,
                          base_url=base, csp=csp, low=low)
        except ImgwarmError as error:  # this source: the others are still printed
            failed += 1
            click.echo(failure_line("picture", error), err=True)
            continue
        note = fallback_note(manifest)
        if note is not None:
            click.echo(printable(f"picture note: {note}"), err=True)
        rule = placeholder_rule(manifest) if csp else None
        css = rule[1] if rule else ""
        if as_json:
            click.echo(json_text({"key": manifest.key, "html": html} |
                                 ({"css": css} if csp else {})))
        else:
            click.echo(html + (f"\n<!-- for the stylesheet: {css} -->" if css else ""))
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


@command()
@click.argument("sources", nargs=-1, metavar="[SOURCE...]")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("var/gallery"), show_default=True,
              help="Folder for site/index.html, pages.json and nginx.conf (apart from the "
              "stores' folders).")
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="ADDR",
              help="The address in nginx.conf (`imgwarm serve` picks a free port itself).")
@click.option("--title", default="imgwarm gallery", show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Most images, when no SOURCE is given (every manifest, by key).")
@click.option("--access-log", metavar="PATH",
              help="Where nginx writes the access log `imgwarm warm` reads (default: the "
              "first plain path of the access_logs setting).")
@click.option("--check", is_flag=True, help="Run `nginx -t` on the config before writing.")
@click.pass_context
def gallery(ctx: click.Context, /, sources: tuple[str, ...], out: Path, listen: str,
            title: str, limit: int, access_log: str | None, check: bool) -> None:
    """Write a gallery page of optimized images: the first SOURCE is the hero (preloaded,
    loaded first), the rest load lazily in a grid; with no SOURCE, every optimized image.
    Also writes the pages file and the nginx config that serves it all (include it in
    nginx's http {}); `imgwarm serve` runs it at once.

    Exit status: 0 written, 1 a source has no manifest or nothing to show, 2 usage errors.
    """
    from imgwarm.manifest import Manifest
    from imgwarm.serve.gallery import write_gallery
    from imgwarm.serve.pages import find_manifest
    from imgwarm.store import Stores

    settings = load(ctx)
    stores = Stores.for_settings(settings.store)
    manifests: list[Manifest] = []
    missing = [s for s in sources if find_manifest(stores, s) is None]
    if missing:
        for source in missing:
            click.echo(printable(f"gallery FAILED: {source}: no manifest"), err=True)
        ctx.exit(EXIT_FAILED)
    if sources:
        manifests = [m for s in sources if (m := find_manifest(stores, s)) is not None]
    else:
        everything = (r for r in stores.manifests.everything() if isinstance(r, Manifest))
        manifests = sorted(everything, key=lambda m: m.key)[:limit]
    if not manifests:
        click.echo("gallery FAILED: no optimized images (run imgwarm optimize first)", err=True)
        ctx.exit(EXIT_FAILED)
    made = write_gallery(settings, manifests, out, listen=listen, title=title,
                         access_log=access_log, check=check)
    click.echo(f"wrote {made.page} ({made.images} images), {made.pages} and {made.config}",
               err=True)
    ctx.exit(EXIT_OK)


@command()
@click.option("--gallery", "folder", type=click.Path(file_okay=False, path_type=Path),
              default=Path("var/gallery"), show_default=True,
              help="The folder `imgwarm gallery` wrote.")
@click.option("--port", type=click.IntRange(1, 65535),
              help="Port on 127.0.0.1 (default: a free one).")
@click.pass_context
def serve(ctx: click.Context, /, folder: Path, port: int | None) -> None:
    """Run nginx on the gallery at http://127.0.0.1:PORT/, in the foreground, with the
    config `imgwarm nginx` writes (RAM tier, NVMe, origin; preload Link on the page);
    Ctrl-C stops it.

    Exit status: 0 stopped, 1 nginx missing or not starting, 2 usage errors.
    """
    from imgwarm.serve.gallery import PAGE, PAGES, SITE
    from imgwarm.serve.server import serve as run

    if not (folder / PAGES).is_file():
        raise click.UsageError(f"{folder} holds no gallery ({PAGES}): run imgwarm gallery "
                               "first")
    if not (folder / SITE / PAGE).is_file():  # written before the page moved to site/
        raise click.UsageError(f"{folder} holds no {SITE}/{PAGE}: run imgwarm gallery again")
    settings = load(ctx)

    def ready(url: str) -> None:
        click.echo(f"Serving the gallery at {url} (Ctrl-C stops)", err=True)

    status = run(settings, folder.resolve(), port=port, ready=ready)
    ctx.exit(EXIT_OK if status == 0 else EXIT_FAILED)
