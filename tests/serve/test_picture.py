"""Picture tags and placeholders, read back as HTML and pixels (the browser's view of them is
test_gallery.py)."""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy
import pytest
from jinja2 import Environment
from PIL import Image

import imgwarm
from imgwarm.config import Settings
from imgwarm.exceptions import SettingsError
from imgwarm.manifest import Credits, Manifest, Placeholder
from imgwarm.pipeline.made import Made
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.placeholder import MAX_URI
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.serve.pages import Also, preloads
from imgwarm.serve.picture import PictureError, picture, placeholder_rule
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.nginx import parse_link

HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)> & \'quotes\''


class Tags(HTMLParser):
    """Every start tag, in order, with its attributes; and the text outside tags."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def _optimized(settings: Settings, tmp_path: Path, name: str = "bike.jpg", *,
               description: str | None = "Red bicycle", size: tuple[int, int] = (1600, 1000),
               seed: int = 1, **options: object) -> Manifest:
    source = tmp_path / name
    source.write_bytes(jpeg_with_exif(photo(*size, seed=seed), quality=90))
    settings = settings.updated(**options) if options else settings
    return optimize_file(source, settings=settings, stores=Stores.local(settings.store),
                         credits=Credits.given(description=description)).manifest


def _preview(placeholder: Placeholder) -> Image.Image:
    data = base64.b64decode(placeholder.lqip.split(",", 1)[1])
    return Image.open(io.BytesIO(data)).convert("RGB")


def _share(color: str, image: Image.Image) -> float:
    """The share of the image's pixels close to ``color``."""
    wanted = numpy.array([int(color[i:i + 2], 16) for i in (1, 3, 5)])
    pixels = numpy.asarray(image, dtype=float).reshape(-1, 3)
    return float((numpy.abs(pixels - wanted).max(axis=1) < 40).mean())


def _srcset(value: str | None) -> list[tuple[str, int]]:
    assert value
    return [(url, int(width.rstrip("w"))) for url, width in
            (item.strip().split(" ") for item in value.split(","))]


def test_the_tag_offers_every_format_and_width(settings: Settings, tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, formats="avif,webp,jpeg", widths="320,640,1280")
    tags = Tags(picture(manifest))
    sources, (img,) = tags.named("source"), tags.named("img")
    assert [s["type"] for s in sources] == ["image/avif", "image/webp"]
    by_format = {"avif": sources[0]["srcset"], "webp": sources[1]["srcset"],
                 "jpeg": img["srcset"]}
    for fmt, srcset in by_format.items():
        want = sorted(((f"/{v.path}", v.width) for v in manifest.variants
                       if v.format == fmt), key=lambda item: item[1])
        assert _srcset(srcset) == want
    assert all(s["sizes"] == "auto, 100vw" for s in sources) and img["sizes"] == "auto, 100vw"
    widest = max((v for v in manifest.variants if v.format == "jpeg"), key=lambda v: v.width)
    assert (img["width"], img["height"]) == (str(widest.width), str(widest.height))
    assert img["src"] in {url for url, _ in _srcset(img["srcset"])}
    assert (img["loading"], img["decoding"], img.get("fetchpriority")) == ("lazy", "async", None)
    assert img["alt"] == "Red bicycle"
    # low: the same lazy tag, kept at low priority (never raised when on screen)
    (low,) = Tags(picture(manifest, low=True)).named("img")
    assert (low["loading"], low["fetchpriority"]) == ("lazy", "low")
    with pytest.raises(SettingsError, match=r"^low: "):
        picture(manifest, low=True, eager=True)


def test_the_hero_offers_what_its_preload_names(settings: Settings, tmp_path: Path) -> None:
    settings = settings.updated(formats="avif,webp,jpeg", widths="320,640")
    manifest = _optimized(settings, tmp_path)
    tags = Tags(picture(manifest, eager=True, sizes="(max-width: 960px) 100vw, 960px",
                        css_class="hero wide"))
    (source,), (img,) = tags.named("source"), tags.named("img")
    assert source["type"] == "image/webp"  # AVIF would be a second request beside the preload
    assert source["sizes"] == img["sizes"] == "(max-width: 960px) 100vw, 960px"
    assert (img["loading"], img["fetchpriority"], img["class"]) == ("eager", "high", "hero wide")
    # the page's preload Link names exactly what this <source> offers: one request
    (page,) = preloads({"/": [manifest.key]}, Stores.local(settings.store), prefix="/",
                       sizes="(max-width: 960px) 100vw, 960px")
    _, link = parse_link(page.link.replace('\\"', '"'))
    assert (link["type"], link["imagesrcset"], link["imagesizes"]) == (
        source["type"], source["srcset"], source["sizes"])


def test_the_phone_lcp_offers_what_its_own_preload_names(settings: Settings,
                                                         tmp_path: Path) -> None:
    """A grid photo that is the LCP on phones (``priority``) is preloaded there too, before
    the hero (a browser asks in the header's order), for those screens only, never pushed;
    its tag offers what that link names."""
    settings = settings.updated(formats="avif,webp,jpeg", widths="320,640")
    hero = _optimized(settings, tmp_path)
    tall = _optimized(settings, tmp_path, "tall.jpg", size=(900, 1400), seed=3)
    phones, grid = "(max-width: 603px)", "(max-width: 603px) calc(100vw - 32px), 320px"
    (source,), (img,) = (tags := Tags(picture(tall, priority=True, above_fold=True,
                                              sizes=grid))).named("source"), tags.named("img")
    (page,) = preloads({"/": [hero.key, tall.key]}, Stores.local(settings.store), prefix="/",
                       also={"/": Also(tall, phones, grid)})
    first, second = page.link.replace('\\"', '"').split(", <")
    assert "nopush" not in second and "media=" not in parse_link("<" + second)[1]
    _, link = parse_link(first)
    assert (link["media"], "nopush" in link) == (phones, True)
    assert (link["type"], link["imagesrcset"], link["imagesizes"]) == (
        source["type"], source["srcset"], source["sizes"])
    assert (img["loading"], img["fetchpriority"]) == ("eager", "high")
    assert page.nopush.count("nopush") == 2


def test_alt_is_escaped_given_or_empty(settings: Settings, tmp_path: Path) -> None:
    hostile = _optimized(settings, tmp_path, "a.jpg", description=HOSTILE)
    html = picture(hostile)
    assert "<script" not in html and "onerror=alert(2)>" not in html
    tags = Tags(html)
    assert [t for t, _ in tags.tags] == ["picture", "source", "img"]
    assert tags.named("img")[0]["alt"] == HOSTILE  # the text, whole, as an attribute value
    assert Tags(picture(hostile, alt="A 'given' <alt>")).named("img")[0]["alt"] == \
        "A 'given' <alt>"
    plain = _optimized(settings, tmp_path, "b.jpg", description=None, seed=2)
    assert 'alt=""' in picture(plain)


def test_the_placeholder_is_a_background_of_the_image(settings: Settings,
                                                      tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, widths="320,640")
    assert manifest.placeholder is not None
    assert len(manifest.placeholder.lqip) <= MAX_URI
    style = Tags(picture(manifest)).named("img")[0]["style"]
    assert style == (f"background:{manifest.placeholder.color} "
                     f"url({manifest.placeholder.lqip}) 50% 50%/cover no-repeat")
    # the preview is the picture, small: its pixels look like the smallest variant's
    preview = _preview(manifest.placeholder)
    smallest = min((v for v in manifest.variants if v.format == "jpeg"), key=lambda v: v.width)
    variant = Image.open(settings.store.origin_root / smallest.path).convert("RGB")
    assert max(preview.size) == 16
    assert abs(preview.width / preview.height - variant.width / variant.height) < 0.15
    a = numpy.asarray(preview.convert("RGB").resize((8, 5)), dtype=float).ravel()
    b = numpy.asarray(variant.resize((8, 5)), dtype=float).ravel()
    assert numpy.corrcoef(a, b)[0, 1] > 0.8
    assert _share(manifest.placeholder.color, variant) > 0.1  # a colour it has, not an average


def test_for_a_strict_csp_the_placeholder_is_a_class_with_its_rule(settings: Settings,
                                                                   tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, widths="320,640")
    rule = placeholder_rule(manifest)
    assert rule is not None
    name, css = rule
    img = Tags(picture(manifest, csp=True, css_class="photo")).named("img")[0]
    assert "style" not in img and img["class"] == f"photo {name}"
    assert css == "." + name + "{" + Tags(picture(manifest)).named("img")[0]["style"] + "}"
    done = Cli()("picture", "--csp", "--json", str(manifest.key),
                 env={"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
                      "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)})
    assert done.exit_code == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["css"] == css and "style=" not in found["html"] and name in found["html"]
    bad = manifest.model_copy(update={"placeholder": Placeholder(color="red;x:url(//evil)",
                                                                 lqip="")})
    assert placeholder_rule(bad) is None  # nothing from a file goes into CSS unchecked


def test_a_placeholder_from_a_file_is_checked(settings: Settings, tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, widths="320")
    for bad in (Placeholder(color="red;x:url(//evil)", lqip=manifest.placeholder.lqip),
                Placeholder(color="#aabbcc", lqip="data:image/webp;base64,AA) url(//evil"),
                Placeholder(color="#aabbcc", lqip="javascript:alert(1)")):
        html = picture(manifest.model_copy(update={"placeholder": bad}))
        assert "style=" not in html and "evil" not in html and "javascript" not in html


def test_a_see_through_image_gets_no_placeholder(settings: Settings, tmp_path: Path) -> None:
    rgba = photo(600, 400, seed=3).bandjoin(128)  # half transparent
    source = tmp_path / "glass.png"
    source.write_bytes(bytes(rgba.pngsave_buffer()))
    stores = Stores.local(settings.store)
    manifest = optimize_file(source, settings=settings, stores=stores).manifest
    assert manifest.placeholder == Placeholder.none()
    assert "style=" not in picture(manifest)

    class NoDecoding:  # the pixel work, wherever it would run: none expected
        def make(self, *args: object) -> Made:
            raise AssertionError("an unchanged re-run decoded the source again")

        def preview(self, *args: object) -> Placeholder:
            raise AssertionError("an unchanged re-run decoded the source again")

    again = optimize_file(source, settings=settings, stores=stores, pixels=NoDecoding())
    assert again.reused and again.manifest.placeholder == Placeholder.none()


def test_an_old_manifest_gets_its_placeholder_without_remaking(settings: Settings,
                                                               tmp_path: Path) -> None:
    settings = settings.updated(widths="320,640")
    stores = Stores.local(settings.store)
    manifest = _optimized(settings, tmp_path)
    old = manifest.model_copy(update={"placeholder": None})
    stores.manifests.put(old)
    times = {v.path: (settings.store.origin_root / v.path).stat().st_mtime_ns
             for v in manifest.variants}
    again = optimize_file(tmp_path / "bike.jpg", settings=settings, stores=stores,
                          credits=Credits.given(description="Red bicycle"))
    assert again.reused
    found = again.manifest.placeholder
    assert found is not None and manifest.placeholder is not None
    assert stores.manifests.get(manifest.key) == again.manifest  # written back
    assert again.manifest.variants == manifest.variants
    # made from the source decoded small, not from the smallest variant: the same picture
    # (the dominant colour may be another of its common colours: the mode of a histogram)
    smallest = min((v for v in manifest.variants if v.format == "jpeg"), key=lambda v: v.width)
    variant = Image.open(settings.store.origin_root / smallest.path).convert("RGB")
    assert _share(found.color, variant) > 0.1
    a, b = (numpy.asarray(_preview(p).resize((8, 5)), dtype=float).ravel()
            for p in (found, manifest.placeholder))
    assert numpy.corrcoef(a, b)[0, 1] > 0.9
    assert times == {v.path: (settings.store.origin_root / v.path).stat().st_mtime_ns
                     for v in manifest.variants}


def test_options_and_paths_are_checked(settings: Settings, tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, widths="320")
    assert 'srcset="https://cdn.example.com/img/' in picture(
        manifest, base_url="https://cdn.example.com/img")
    for base in ("javascript:alert(1)", "img/", '/a"b/', "//evil.example/", "/img\t/",
                 "/a\nb/", "/\x00/", "/a b/", "/a,b/"):
        with pytest.raises(SettingsError, match=r"^base_url "):  # the option, not the flag
            picture(manifest, base_url=base)
    with pytest.raises(SettingsError, match=r"^sizes "):
        picture(manifest, sizes='100vw" onload="x')
    with pytest.raises(SettingsError, match=r"^css_class "):
        picture(manifest, css_class='a" onclick="x')
    odd = manifest.variants[0].model_copy(update={"path": '../x" onerror="y.webp'})
    with pytest.raises(PictureError, match="variant path"):
        picture(manifest.model_copy(update={"variants": [odd]}))


def test_the_jinja2_filter_and_the_api(settings: Settings, tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, "a.jpg", description=HOSTILE, widths="320")
    env = Environment(autoescape=True)
    imgwarm.register_jinja(env)
    page = env.from_string('<main>{{ m | picture(sizes="50vw", eager=True) }}</main>').render(
        m=manifest)
    assert page == f"<main>{imgwarm.picture(manifest, sizes='50vw', eager=True)}</main>"
    from_json = env.from_string("{{ m | picture }}").render(m=json.loads(manifest.to_json()))
    assert from_json == picture(manifest)


def test_the_picture_command(settings: Settings, tmp_path: Path) -> None:
    _optimized(settings, tmp_path, widths="320,640")
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    run = lambda *args: Cli()("picture", *args, env=env)  # noqa: E731
    done = run(str(tmp_path / "bike.jpg"), "--eager", "--sizes", "50vw")
    assert done.exit_code == 0, done.stderr
    img = Tags(done.stdout).named("img")[0]
    assert (img["loading"], img["sizes"], img["alt"]) == ("eager", "50vw", "Red bicycle")
    done = run(str(tmp_path / "bike.jpg"), "nowhere.jpg", "--json")
    assert done.exit_code == 1
    assert "nowhere.jpg: no manifest" in done.stderr
    (line,) = done.stdout.splitlines()
    assert Tags(json.loads(line)["html"]).named("img")[0]["alt"] == "Red bicycle"
    done = run(str(tmp_path / "bike.jpg"), str(tmp_path / "bike.jpg"), "--base-url", "ftp://x/")
    assert done.exit_code == 2 and done.stderr.count("base_url 'ftp://x/'") == 1
    assert not done.stdout  # a wrong option: nothing printed
    img = Tags(run(str(tmp_path / "bike.jpg"), "--low").stdout).named("img")[0]
    assert (img["loading"], img["fetchpriority"]) == ("lazy", "low")
    done = run(str(tmp_path / "bike.jpg"), "--low", "--eager")
    assert done.exit_code == 2 and "--eager and --low" in done.stderr and not done.stdout


def test_gallery_and_serve_refuse_what_they_cannot_show(settings: Settings,
                                                        tmp_path: Path) -> None:
    manifest = _optimized(settings, tmp_path, widths="320")
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    out = tmp_path / "www"
    done = Cli()("gallery", manifest.key, "nowhere.jpg", "--out", out, env=env)
    assert done.exit_code == 1 and "nowhere.jpg: no manifest" in done.stderr
    assert not out.exists()  # nothing written
    stores = Stores.local(settings.store)
    odd = manifest.variants[0].model_copy(update={"path": "../../etc/passwd"})
    stores.manifests.put(manifest.model_copy(update={"key": "odd.jpg", "variants": [odd]}))
    done = Cli()("gallery", manifest.key, "odd.jpg", "--out", out, env=env)
    # a record naming a path that leaves the origin is a damaged one: read as none
    assert done.exit_code == 1 and "odd.jpg: no manifest" in done.stderr
    assert not out.exists()
    done = Cli()("gallery", manifest.key, "--out", out, "--title", "<b>Ads</b> & more",
                 env=env)
    assert done.exit_code == 0, done.stderr
    page = (out / "site" / "index.html").read_text()  # the page apart from the stores' files
    assert "<title>&lt;b&gt;Ads&lt;/b&gt; &amp; more</title>" in page
    assert json.loads((out / "pages.json").read_text()) == {"/": [manifest.key]}
    assert "add_header Link" in (out / "nginx.conf").read_text()
    done = Cli()("serve", "--gallery", tmp_path / "empty", env=env)
    assert done.exit_code == 2 and "holds no gallery" in done.stderr
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = Cli()("serve", "--gallery", out, "--port", str(port), env=env)
    assert done.exit_code == 1 and f"127.0.0.1:{port} is taken" in done.stderr
    assert "Serving" not in done.stderr


def test_a_manifest_that_is_not_one_is_one_line(settings: Settings, tmp_path: Path) -> None:
    manifest = json.loads(_optimized(settings, tmp_path, "a.jpg", widths="320").to_json())
    manifest["variants"][0]["width"] = "wide"
    env = Environment(autoescape=True)
    imgwarm.register_jinja(env)
    with pytest.raises(PictureError, match=r"not a manifest: variants\.0\.width: ") as caught:
        env.from_string("{{ m | picture }}").render(m=manifest)
    assert "\n" not in str(caught.value)


def test_a_tag_without_a_jpeg_is_noted(settings: Settings, tmp_path: Path) -> None:
    _optimized(settings, tmp_path, "w.jpg", widths="320", formats="webp")
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    done = Cli()("picture", str(tmp_path / "w.jpg"), env=env)
    assert done.exit_code == 0
    img = Tags(done.stdout).named("img")[0]
    assert img["src"] is not None and img["src"].endswith(".webp")  # the only format there is
    assert done.stderr.count("\n") == 1 and "no JPEG variant" in done.stderr
    assert "add jpeg to the formats" in done.stderr
    done = Cli()("picture", str(tmp_path / "w.jpg"), env={**env, "IMGWARM_FORMATS": "jpeg"})
    assert "no JPEG variant" in done.stderr  # the manifest decides, not today's settings
    _optimized(settings, tmp_path, "j.jpg", widths="320")
    done = Cli()("picture", str(tmp_path / "j.jpg"), env=env)
    assert done.exit_code == 0 and not done.stderr  # with a JPEG: nothing to say
