"""MkDocs hook: the pages written from the code, so that they cannot drift from it.

- ``index.md``: README.md, its links into ``docs/`` made relative to the site;
- ``cli.md``: every command of ``imgwarm`` (the click group in ``imgwarm.cli.main``), its
  usage, help and options, as ``--help`` prints them;
- ``settings.md``: every setting of ``imgwarm.config``, from its pydantic Field: name,
  ``IMGWARM_*`` variable, type, allowed range, default, description;
- ``api.md``: its ``<!-- api -->`` marker replaced by the public names of ``imgwarm`` with
  their signatures and docstrings;
- the benchmark screenshots that ``bench/picture.py`` writes to ``bench/screenshots/``.

Registered in mkdocs.yml (``hooks:``); ``mkdocs build --strict`` fails on any broken link.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # the pages can be made without MkDocs (tests/config reads the settings one)
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_PAGE = "settings.md"


# ---------------------------------------------------------------- text


def _escape(text: str) -> str:
    """Plain text for Markdown: characters that would start markup are escaped."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\*_\[\]|])", r"\\\1", text)


def markdown_text(text: str, link: dict[str, str] | None = None) -> str:
    """Help or description text as Markdown: `code` spans and ``code`` kept, the rest
    escaped; words in ``link`` (setting names) made links."""
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text).replace("``", "`")
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(part)  # the tables extension leaves pipes in code spans alone
            continue
        if not link:
            out.append(_escape(part))
            continue
        words = re.split(r"(\b[a-z0-9]+(?:_[a-z0-9]+)+\b)", part)
        out.append("".join(f"[`{w}`]({link[w]})" if i % 2 and w in link else _escape(w)
                           for i, w in enumerate(words)))
    return "".join(out)


def paragraphs(text: str) -> list[str]:
    """A click or Python docstring's paragraphs (``\\b`` blocks keep their lines)."""
    found = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(text or "")):
        if block.startswith("- "):  # a list: one item a line
            items = re.split(r"\n(?=- )", block)
            found.append("\n".join(" ".join(line.strip() for line in item.split("\n"))
                                   for item in items))
        elif block.startswith("\b"):
            lines = block.split("\n")[1:]
            found.append("\n".join(f"{line}  " for line in lines))  # hard line breaks
        else:
            found.append(" ".join(line.strip() for line in block.split("\n")))
    return [p for p in found if p.strip()]


# ---------------------------------------------------------------- the command line


def _setting_links() -> dict[str, str]:
    from imgwarm.config import GROUPS

    return {name: f"{SETTINGS_PAGE}#{name}" for model in GROUPS.values()
            for name in model.model_fields}


def cli_page() -> str:
    from imgwarm.cli.main import cli
    from imgwarm.cli.setting import SettingOption

    links = _setting_links()
    root = click.Context(cli, info_name="imgwarm")
    lines = [
        "# Command line",
        "",
        "*Generated from the commands themselves (`imgwarm.cli`): what `imgwarm COMMAND "
        "--help` prints. An option that sets a setting links to it; its help is the "
        "setting's own description.* How a command ends, and what each error means: "
        "[errors and exit codes](security.md#errors-and-exit-codes).",
        "",
        f"```\nimgwarm {' '.join(cli.collect_usage_pieces(root))}\n```",
        "",
        *(markdown_text(p, links) + "\n" for p in paragraphs(cli.help or "")),
        _options_table(cli, root, links, SettingOption),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = [(name, cmd) for name, cmd in cli.commands.items() if not cmd.hidden]
    for name, command in commands:
        summary = markdown_text(command.get_short_help_str(limit=120))
        lines.append(f"| [`{name}`](#{name}) | {summary} |")
    lines.append("")
    for name, command in commands:
        ctx = click.Context(command, info_name=name, parent=root)
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += [f"## {name} {{#{name}}}", "", f"```\nimgwarm {name} {usage}\n```", ""]
        lines += [markdown_text(p, links) + "\n" for p in paragraphs(command.help or "")]
        lines += [_options_table(command, ctx, links, SettingOption), ""]
    return "\n".join(lines)


def _options_table(command: click.Command, ctx: click.Context, links: dict[str, str],
                   setting_option: type) -> str:
    from imgwarm.cli.setting import shown_default
    from imgwarm.config import describe_field

    rows = ["| option | |", "|---|---|"]
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is None:
            continue
        flags, help_text = record
        setting = getattr(param, "setting", None) if isinstance(param, setting_option) else None
        cell = markdown_text(help_text, links)
        if setting:  # the "[setting x; default: y]" tail as a link
            cell = re.sub(r" \\\[setting .*\\\]$", "", cell)
            info = describe_field(setting)
            default = shown_default(info) if info else ""
            cell += (f" Setting [`{setting}`]({links.get(setting, SETTINGS_PAGE)}), default "
                     f"`{default}`." if default else
                     f" Setting [`{setting}`]({links.get(setting, SETTINGS_PAGE)}).")
        rows.append(f"| `{flags}` | {cell} |")
    return "\n".join(rows) if len(rows) > 2 else ""


# ---------------------------------------------------------------- settings


def _type_name(annotation: Any) -> str:
    """A setting's type in words."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args) if len(args) < 3 else \
            "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        named = [_type_name(a) for a in args if a is not type(None)]
        text = " or ".join(named)
        return f"{text}, or unset" if type(None) in args else text
    if origin in (list, tuple, set, frozenset):
        item = _type_name(args[0]) if args else "values"
        item = item.replace("one of ", "among ", 1) if item.startswith("one of") else f"of {item}"
        return f"list {item} (comma-separated in a variable)"
    if origin is typing.Annotated:
        return _type_name(args[0])
    simple = {bool: "boolean (`true`, `false`)", int: "integer", float: "number", str: "text",
              Path: "path"}
    if annotation in simple:
        return simple[annotation]
    name = getattr(annotation, "__name__", str(annotation))
    doc = inspect.getdoc(annotation) if isinstance(annotation, type) else None
    summary = doc.split("\n\n")[0].replace("\n", " ") if doc else ""
    summary = summary[:1].lower() + summary[1:].rstrip(".")
    return f"{name} ({summary})" if summary else name


def _range(info: Any) -> str:
    low = high = None
    low_open = high_open = False
    for meta in info.metadata:
        if getattr(meta, "ge", None) is not None:
            low = meta.ge
        if getattr(meta, "gt", None) is not None:
            low, low_open = meta.gt, True
        if getattr(meta, "le", None) is not None:
            high = meta.le
        if getattr(meta, "lt", None) is not None:
            high, high_open = meta.lt, True
    if low is not None and high is not None and not (low_open or high_open):
        return f"{low}..{high}"
    said = []
    if low is not None:
        said.append(f"above {low}" if low_open else f"at least {low}")
    if high is not None:
        said.append(f"below {high}" if high_open else f"at most {high}")
    return ", ".join(said)


_UNITS = {"Size": " bytes", "Duration": " seconds"}
_AFFECTS = {
    "output": "Changes the variants' bytes or names: sources are made again on the next run.",
    "refusal": "Decides which sources are refused: a refusal is given again without "
               "decoding only while it is the same.",
}


def settings_page() -> str:
    import imgwarm.config as config
    import imgwarm.config.units as units
    from imgwarm.cli.setting import shown_default
    from imgwarm.config import GROUPS

    links = {name: f"#{name}" for model in GROUPS.values() for name in model.model_fields}
    lines = [
        "# Settings",
        "",
        "*Generated from the settings' own declarations (`imgwarm/config/`): one source of "
        "truth for this page, `imgwarm COMMAND --help` and the errors that name a setting.*",
        "",
        *(markdown_text(p, links) + "\n" for p in paragraphs(config.__doc__ or "")),
        "Each setting has one name: the key in the TOML file (`name = value` lines, as "
        "`imgwarm config` prints them), the keyword of `imgwarm.load_settings` and of "
        "every `imgwarm` call's `**options`, and, upper-cased after `IMGWARM_`, the "
        "environment variable. "
        "`imgwarm config` prints the settings in effect; `imgwarm config --json` as JSON. "
        "A value outside its range is refused at start, naming the setting, where it came "
        "from and what is allowed (exit status 2).",
        "",
        "## Sizes and durations {#units}",
        "",
        *(markdown_text(p, links) + "\n" for p in paragraphs(units.__doc__ or "")[:2]),
        "Values are parsed once, when the settings load, into bytes and seconds: `imgwarm "
        "config` prints them so (`max_bytes = 67108864`, `hot_half_life = 86400.0`), and that "
        "TOML loads back as it is. `imgwarm gc --grace` and `imgwarm warm --every` take the "
        "same forms as a duration.",
        "",
    ]
    for group, model in GROUPS.items():
        # the group's module says what the group is for; else the model's own docstring
        doc = inspect.getdoc(inspect.getmodule(model)) or inspect.getdoc(model) or ""
        lines += [f"## {group.capitalize()} {{#group-{group}}}", ""]
        lines += [markdown_text(p, links) + "\n" for p in paragraphs(doc)[:1]]
        for name, info in model.model_fields.items():
            facts = [f"`IMGWARM_{name.upper()}`", _type_name(info.annotation)]
            allowed = _range(info)
            if allowed:  # a Size's or a Duration's bounds are in bytes or seconds
                unit = _UNITS.get(getattr(info.annotation, "__name__", ""), "")
                facts.append(f"allowed {allowed}{unit}")
            default = shown_default(info)
            facts.append(f"default `{default}`" if default else "default: none")
            lines += [f"### `{name}` {{#{name}}}", "", " · ".join(facts), "",
                      markdown_text(info.description or "", links), ""]
            extra = info.json_schema_extra
            if isinstance(extra, dict) and extra.get("affects") in _AFFECTS:
                note = _AFFECTS[str(extra["affects"])]
                if extra.get("only_if"):
                    note = note.replace(":", " (while a quality is `auto`):", 1)
                lines += [f"*{note}*", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the Python API


def _docstring(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    doc = doc.replace("::\n", ":\n")
    out = []
    for block in re.split(r"\n\s*\n", doc):
        if block.startswith("    "):  # a literal block
            out.append("```python\n" + inspect.cleandoc(block) + "\n```")
        else:
            out.append(markdown_text(" ".join(line.strip() for line in block.split("\n"))))
    return "\n\n".join(out)


def api_reference() -> str:
    """Functions, then data classes, then the errors (the tree from imgwarm.exceptions)."""
    import imgwarm
    import imgwarm.exceptions as exceptions

    functions, classes, errors = [], [], []
    for name in imgwarm.__all__:
        obj = getattr(imgwarm, name)
        if inspect.isfunction(obj):
            signature = str(inspect.signature(obj)).replace("'", "")
            functions += [f"### `{name}` {{#{name}}}", "",
                          f"```python\nimgwarm.{name}{signature}\n```", "", _docstring(obj), ""]
        elif inspect.isclass(obj) and issubclass(obj, BaseException):
            facts = f"exit status {getattr(obj, 'exit_code', 1)}"
            if getattr(obj, "transient", False):
                facts += "; transient: trying again may cure it"
            errors += [f"### `{name}` {{#{name}}}", "",
                       f"*{obj.__mro__[1].__name__}* · {facts}", "", _docstring(obj), ""]
        elif inspect.isclass(obj):
            classes += [f"### `{name}` {{#{name}}}", "", _docstring(obj), ""]
    tree = []
    for block in re.split(r"\n\s*\n", inspect.getdoc(exceptions) or ""):
        if block.startswith("ImgwarmError"):
            tree.append(f"```\n{block}\n```")
        elif not block.startswith("Light on purpose"):
            tree.append(markdown_text(" ".join(block.split())))
    return "\n".join(["## Functions", "", *functions, "## Data", "", *classes,
                      "## Errors", "", "\n\n".join(tree), "", *errors])


# ---------------------------------------------------------------- MkDocs events


def _readme() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)  # links into docs/ as the site sees them


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from mkdocs.structure.files import File

    for uri, make in (("index.md", _readme), ("cli.md", cli_page),
                      (SETTINGS_PAGE, settings_page)):
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated by docs/hooks.py: remove the file")
        files.append(File.generated(config, uri, content=make()))
    for shot in sorted((ROOT / "bench" / "screenshots").glob("*.jpg")):
        files.append(File.generated(config, f"bench/screenshots/{shot.name}",
                                    abs_src_path=str(shot)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "api.md":
        return markdown.replace("<!-- api -->", api_reference())
    return markdown
