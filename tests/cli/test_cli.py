"""The command line: exit codes, --json, show, config, samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import piexif
import pytest

from imgwarm.store.format import FORMAT_RECORD
from tests.support.cli import Cli
from tests.support.files import all_files
from tests.support.images import Credits, bomb_jpeg, jpeg_with_exif, photo

UKRAINIAN = "Червоний велосипед на київській вулиці"


def make_batch(folder: Path) -> None:
    (folder / "nested").mkdir(parents=True)
    (folder / "good.jpg").write_bytes(jpeg_with_exif(photo(1000, 700),
                                                     credits=Credits(copyright="© A")))
    (folder / "nested" / "also good.JPG").write_bytes(bytes(photo(500, 400).jpegsave_buffer()))
    (folder / "nested" / "bomb.jpg").write_bytes(bomb_jpeg())
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "notes.txt").write_text("not an image, and not picked up from a folder")


@pytest.mark.slow
def test_batch_json_and_exit_code(run_cli: Cli, tmp_path: Path) -> None:
    make_batch(tmp_path / "in")
    result = run_cli("optimize", "--json", "--description", UKRAINIAN, tmp_path / "in")
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    by_name = {Path(o["source"]).name: o for o in lines}
    assert set(by_name) == {"good.jpg", "also good.JPG", "bomb.jpg", "empty.jpg"}
    good = by_name["good.jpg"]
    assert list(good) == ["source", "ok", "width", "height", "description", "copyright",
                          "variants"]
    assert good["ok"] and (good["width"], good["height"]) == (1000, 700)
    assert good["description"] == UKRAINIAN and good["copyright"] == "© A"
    assert [(v["format"], v["width"]) for v in good["variants"]] == [
        ("webp", 320), ("jpeg", 320), ("webp", 680), ("jpeg", 680), ("webp", 860),
        ("webp", 1000), ("jpeg", 1000)]  # the JPEG at the fallback widths
    for variant in good["variants"]:
        assert set(variant) == {"format", "width", "height", "bytes", "path", "quality",
                                "score"}
        assert variant["quality"] == (80 if variant["format"] == "webp" else 82)
        assert variant["score"] is None  # measured for auto quality only
        path = Path("var/origin") / variant["path"]
        assert path.stat().st_size == variant["bytes"]
        exif = piexif.load(str(path))
        assert exif["0th"][piexif.ImageIFD.ImageDescription].decode() == UKRAINIAN
    bomb = by_name["bomb.jpg"]
    assert set(bomb) == {"source", "ok", "error"}
    assert bomb["source"] == str(tmp_path / "in/nested/bomb.jpg") and bomb["ok"] is False
    assert "max_pixels" in bomb["error"]
    assert by_name["empty.jpg"]["error"].endswith("empty.jpg: empty file (0 bytes), not an image")


@pytest.mark.slow
def test_human_output_names_the_failed_file(run_cli: Cli, tmp_path: Path) -> None:
    make_batch(tmp_path / "in")
    result = run_cli("optimize", tmp_path / "in")
    assert result.exit_code == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 2
    assert any("bomb.jpg: 60000x60000" in line for line in failed)
    assert "2 failed" in result.stderr
    assert result.stdout.count("done") == 2


def test_all_good_exits_0_and_rerun_is_unchanged(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "one.jpg"
    source.write_bytes(bytes(photo(800, 600).jpegsave_buffer()))
    first = run_cli("optimize", source)
    assert first.exit_code == 0, first.output
    files = all_files(Path("var"))
    again = run_cli("optimize", source)
    assert again.exit_code == 0 and again.stdout.startswith("unchanged")
    assert all_files(Path("var")) == files


def test_usage_errors_exit_2(run_cli: Cli, tmp_path: Path) -> None:
    assert run_cli("optimize").exit_code == 2
    result = run_cli("optimize", "--webp-quality", "150", tmp_path)
    assert result.exit_code == 2
    assert "setting webp_quality = '150'" in result.stderr
    assert "IMGWARM_WEBP_QUALITY" in result.stderr
    assert "a quality is 1..100, or auto" in result.stderr
    result = run_cli("optimize", tmp_path, env={"IMGWARM_WIDTHS": "320,0"})
    assert result.exit_code == 2 and "width 0 is outside 1..16383" in result.stderr
    result = run_cli("optimize", tmp_path, env={"IMGWARM_FORMATS": "gif"})
    assert result.exit_code == 2 and "IMGWARM_FORMATS" in result.stderr
    assert run_cli("frobnicate").exit_code == 2


def test_missing_source_fails_with_its_name(run_cli: Cli, tmp_path: Path) -> None:
    result = run_cli("optimize", tmp_path / "nope.jpg")
    assert result.exit_code == 1
    assert "nope.jpg: no such file or folder" in result.stderr


def test_show_prints_the_manifest(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "s.jpg"
    source.write_bytes(jpeg_with_exif(photo(700, 500), credits=Credits(description="Dog")))
    assert run_cli("optimize", source).exit_code == 0
    shown = run_cli("show", source)
    assert shown.exit_code == 0
    manifest = json.loads(shown.stdout)
    assert manifest["key"] == str(source.resolve())
    assert manifest["description"] == "Dog"
    assert len(manifest["source_sha256"]) == 64
    assert (manifest["width"], manifest["height"]) == (700, 500)
    assert all((Path("var/origin") / v["path"]).is_file() for v in manifest["variants"])
    missing = run_cli("show", tmp_path / "never.jpg")
    assert missing.exit_code == 1 and "no manifest" in missing.stderr
    source.rename(tmp_path / "moved.jpg")  # shown by its old path all the same
    lines = run_cli("show", "--json", source, source).stdout.splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == manifest


def test_folder_scan_skips_imgwarm_output(run_cli: Cli, tmp_path: Path) -> None:
    Path("photo.jpg").write_bytes(bytes(photo(700, 500).jpegsave_buffer()))
    assert run_cli("optimize", ".").exit_code == 0
    assert any(p.suffix == ".jpg" for p in all_files(Path("var/origin")))
    again = run_cli("optimize", "--json", ".")
    assert again.exit_code == 0
    assert [json.loads(line)["source"] for line in again.stdout.splitlines()] == ["photo.jpg"]


def test_blank_options_do_not_erase_source_text(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "c.jpg"
    source.write_bytes(jpeg_with_exif(photo(400, 300), credits=Credits(description="Cat")))
    result = run_cli("optimize", "--json", "--description", "  ", "--artist", " Ann ", source)
    data = json.loads(result.stdout)
    assert data["description"] == "Cat"
    exif = piexif.load(str(Path("var/origin") / data["variants"][0]["path"]))
    assert exif["0th"][piexif.ImageIFD.Artist] == b"Ann"


def test_config_shows_effective_settings(run_cli: Cli, tmp_path: Path) -> None:
    Path("imgwarm.toml").write_text('widths = [100, 200]\njpeg_quality = 70\n')
    result = run_cli("config", "--json", env={"IMGWARM_JPEG_QUALITY": "75",
                                              "IMGWARM_ORIGIN_ROOT": "/srv/img",
                                              "IMGWARM_MAX_PIXELS": "5000000",
                                              "IMGWARM_MAX_BYTES": "1000000",
                                              "IMGWARM_WEBP_QUALITY": "70",
                                              "IMGWARM_FORMATS": "webp,avif,jpeg"})
    assert result.exit_code == 0, result.output
    values = json.loads(result.stdout)
    assert values["widths"] == [100, 200]  # file
    assert values["jpeg_quality"] == 75  # environment beats file
    assert values["origin_root"] == "/srv/img"
    assert (values["max_pixels"], values["max_bytes"], values["webp_quality"]) == (
        5_000_000, 1_000_000, 70)
    assert values["formats"] == ["avif", "webp", "jpeg"]
    toml = run_cli("config")
    assert "# IMGWARM_WEBP_QUALITY: WebP quality, 1..100, or auto" in toml.stdout
    assert "widths = [100, 200]" in toml.stdout


@pytest.mark.slow
def test_samples_then_optimize(run_cli: Cli, tmp_path: Path) -> None:
    assert run_cli("samples", tmp_path / "samples").exit_code == 0
    result = run_cli("optimize", "--json", tmp_path / "samples")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(objects) >= 5 and all(o["ok"] for o in objects)


def test_console_script_runs(tmp_path: Path) -> None:
    """The installed entry point, as a user runs it (a real process, no TTY)."""
    source = tmp_path / "p.jpg"
    source.write_bytes(bytes(photo(400, 300).jpegsave_buffer()))
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    done = subprocess.run([str(exe), "optimize", "--json", str(source)], cwd=tmp_path,
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert done.stderr == ""
    help_text = subprocess.run([str(exe), "optimize", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "Exit status: 0 when every source succeeded" in help_text


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a TTY (a real pseudo-terminal here) many sources get a progress bar."""
    import pty

    folder = tmp_path / "many"
    folder.mkdir()
    # Paths that rich would read as markup: "[red]" styles, "[/b]" (a folder "[" holding
    # "b].jpg") raises MarkupError.
    (folder / "[").mkdir()
    names = ["p0.jpg", "p1.jpg", "[red]x.jpg", "[/b].jpg"]
    for i, name in enumerate(names):
        (folder / name).write_bytes(bytes(photo(300, 200, seed=i).jpegsave_buffer()))
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env |= {"TERM": "xterm", "COLUMNS": "100"}
    main, child = pty.openpty()
    done = subprocess.run([str(exe), "optimize", str(folder)], cwd=tmp_path, stdin=child,
                          stdout=child, stderr=child, env=env, check=False, timeout=120)
    os.close(child)
    output = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    text = output.decode("utf-8", "replace")
    assert done.returncode == 0, text
    assert "optimizing" in text and "4/4" in text
    assert text.count("done") >= 4
    assert "[red]x.jpg" in text and "[/b].jpg" in text


def imgwarm_bytes(*args: bytes | str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The real command, with arguments and output as raw bytes (file names need not be
    UTF-8)."""
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, env=env,
                          check=False, timeout=300)


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_round_trips(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    name = b"bad\xff name.jpg"
    (Path(os.fsdecode(folder)) / os.fsdecode(name)).write_bytes(
        bytes(photo(400, 300).jpegsave_buffer()))
    done = imgwarm_bytes("optimize", "--json", str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stdout.decode("utf-8")  # valid UTF-8, strictly
    found = json.loads(line)
    assert found["ok"] is True
    assert os.fsencode(found["source"]) == os.fsencode(folder) + b"/" + name  # lossless
    assert all(Path(v["path"]).name.startswith("bad-xff-name.") for v in found["variants"])
    shown = imgwarm_bytes("show", "--json", folder / os.fsdecode(name), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert os.fsencode(json.loads(shown.stdout)["key"]).endswith(name)
    human = imgwarm_bytes("optimize", str(folder), cwd=tmp_path)
    assert b"bad\\xff name.jpg" in human.stdout and b"\xff" not in human.stdout


def test_a_file_name_with_a_newline_keeps_to_one_line(run_cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "two\nlines.jpg").write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    (folder / "bad\x1b[2J.jpg").write_bytes(b"not an image")
    result = run_cli("optimize", folder)
    assert result.exit_code == 1
    assert result.stdout.count("\n") == 1 and "two\\nlines.jpg" in result.stdout
    failed = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "bad\\x1b[2J.jpg" in failed[0] and "\x1b" not in result.stderr


def test_a_refusal_never_shows_the_file_content(run_cli: Cli, tmp_path: Path) -> None:
    link = tmp_path / "photo.jpg"
    link.symlink_to("/etc/passwd")
    result = run_cli("optimize", link)
    assert result.exit_code == 1
    assert "not a recognised image format" in result.stderr
    first = Path("/etc/passwd").read_bytes()[:8]
    assert first.hex(" ") not in result.stderr and first.decode() not in result.stderr


def test_an_output_error_names_the_source(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "one.jpg"
    source.write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    origin = tmp_path / "origin"  # every top shard folder's name taken by a file
    origin.mkdir()
    (origin / FORMAT_RECORD).write_text('{"format": 1}')  # a store in use: its record there
    for top in range(256):
        (origin / f"{top:02x}").touch()
    result = run_cli("optimize", "--origin-root", origin, source)
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("FAILED")]
    assert line.startswith(f"FAILED {source}: cannot write {origin}/")


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--description", "red\x1b[31m bike", "Error: description: contains the control or bidi "
     "character U+001B"),
    ("--copyright", "\u202e(c) Ann", "Error: copyright: contains the control or bidi "
     "character U+202E"),
    ("--artist", "bell\x07", "U+0007"),
    ("--description", "d" * 100_000, "Error: description: 100,000 bytes of UTF-8 text, over "
     "the 65,474 bytes an output's EXIF holds"),
])
def test_given_text_that_cannot_be_stored_is_a_usage_error(
    run_cli: Cli, tmp_path: Path, option: str, value: str, said: str
) -> None:
    source = tmp_path / "one.jpg"
    source.write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    result = run_cli("optimize", option, value, source)
    assert result.exit_code == 2
    assert said in result.stderr
    assert all_files(Path("var")) == []


@pytest.mark.slow
def test_an_output_that_is_not_utf8_gets_escapes_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "Кіт.jpg").write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env["PYTHONIOENCODING"] = "latin-1"
    done = subprocess.run([str(exe), "optimize", "--json", str(folder)], cwd=tmp_path,
                          capture_output=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.decode("ascii"))["source"].endswith("Кіт.jpg")
    human = subprocess.run([str(exe), "optimize", str(folder)], cwd=tmp_path,
                           capture_output=True, env=env, check=False)
    assert human.returncode == 0 and b"\\u041a\\u0456\\u0442.jpg" in human.stdout


@pytest.mark.parametrize("prefix", ["/../", "/img/../", "/./", "/a/./b/"])
def test_an_unsafe_image_prefix_option_is_refused_as_the_setting_is(
        run_cli: Cli, tmp_path: Path, prefix: str) -> None:
    from imgwarm.config import load_settings
    from imgwarm.exceptions import SettingsError
    from imgwarm.serve.nginx import NginxOptions, render

    out = tmp_path / "imgwarm.conf"
    by_option = run_cli("nginx", "--image-prefix", prefix, "--out", out)
    by_setting = run_cli("nginx", "--out", out, env={"IMGWARM_IMAGE_PREFIX": prefix})
    for done in (by_option, by_setting):
        said = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        assert done.exit_code == 2 and len(said) == 1, done.stderr
        assert said[0].startswith("Error: invalid setting image_prefix") and "'..'" in said[0]
    assert not out.exists()
    with pytest.raises(SettingsError, match="invalid setting image_prefix"):  # the library too
        render(load_settings(), NginxOptions(image_prefix=prefix))
