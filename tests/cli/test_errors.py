"""Errors: every class in one module, each with its exit code and whether it is transient;
the command line ends on them in one place (one line, that exit status)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import imgwarm
from imgwarm import exceptions
from imgwarm.cli.common import EXIT_FAILED, EXIT_USAGE, Command, command
from imgwarm.cli.main import cli
from imgwarm.exceptions import FormatTooNew, ImgwarmError

PACKAGE = Path(imgwarm.__file__).parent
CLASSES = sorted((c for c in vars(exceptions).values()
                  if inspect.isclass(c) and issubclass(c, ImgwarmError)), key=lambda c: c.__name__)
TRANSIENT = {"TransientError", "TransientStorageError", "BrokerError", "WarmBusy"}
USAGE = {"SettingsError", "ConfigValueError", "LogFormatError", "LayoutError", "FormatTooNew"}


def made(cls: type[ImgwarmError]) -> ImgwarmError:
    """An instance, with a message that says which class it is."""
    if issubclass(cls, exceptions.SourceError):
        return cls("up/photo.jpg", f"a {cls.__name__}")
    if cls is exceptions.ObjectTooLarge:
        return cls(123)
    return cls(f"a {cls.__name__}")


def test_every_public_error_is_defined_in_the_exceptions_module_and_exported() -> None:
    assert len(CLASSES) >= 24
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "exceptions.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
                if any(b.endswith(("Error", "Exception", "Busy")) for b in bases):
                    elsewhere.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not elsewhere, elsewhere
    assert {c.__name__ for c in CLASSES} <= set(imgwarm.__all__)
    for cls in CLASSES:
        assert getattr(imgwarm, cls.__name__) is cls
        assert cls.__name__ in (exceptions.__doc__ or ""), f"{cls.__name__} not in the tree"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_each_class_says_its_exit_code_and_by_its_type_whether_it_is_transient(
        cls: type[ImgwarmError]) -> None:
    assert cls.exit_code == (EXIT_USAGE if cls.__name__ in USAGE else EXIT_FAILED)
    assert issubclass(cls, exceptions.TransientError) is (cls.__name__ in TRANSIENT)
    # what the workers retry on (imgwarm/workers/task.py) is transient, and nothing permanent
    # is: a bad image is never retried
    assert not (issubclass(cls, exceptions.SourceError) and
                issubclass(cls, exceptions.TransientError))


def test_queued_jobs_retry_by_type() -> None:
    """Every task retries what is a TransientError, and only that (the worker's own test:
    tests/workers/test_retries.py)."""
    from imgwarm.config import Settings
    from imgwarm.workers.task import worker_app

    app = worker_app(Settings())
    tasks = [t for name, t in app.tasks.items() if name.startswith("imgwarm.")]
    assert len(tasks) >= 3
    for task in tasks:
        assert tuple(task.autoretry_for) == (exceptions.TransientError,), task.name


def test_the_old_import_paths_still_work() -> None:
    from imgwarm.cache.logformat import LogFormatError
    from imgwarm.exceptions import WarmBusy
    from imgwarm.lifecycle.delete import NotAnOriginal, UnknownSource
    from imgwarm.serve.confsafe import ConfigValueError
    from imgwarm.serve.nginx import NginxError
    from imgwarm.serve.pages import PagesError
    from imgwarm.serve.picture import PictureError
    from imgwarm.store import ObjectTooLarge

    assert {LogFormatError, WarmBusy, NotAnOriginal, UnknownSource, ConfigValueError,
            NginxError, PagesError, PictureError, ObjectTooLarge} <= set(CLASSES)


def test_every_command_ends_on_errors_in_the_one_place() -> None:
    assert cli.commands
    for name, found in cli.commands.items():
        assert isinstance(found, Command), name


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_command_line_maps_each_class_to_one_line_and_its_exit_code(
        cls: type[ImgwarmError]) -> None:
    error = made(cls)

    @click.group()
    def group() -> None:
        pass

    @command()
    def boom() -> None:
        """Raises the error."""
        raise error

    group.add_command(boom)
    done = CliRunner().invoke(group, ["boom"], catch_exceptions=False)
    assert done.exit_code == cls.exit_code, done.stderr
    said = [line for line in done.stderr.splitlines()
            if line.strip() and not line.startswith(("Usage:", "Try "))]
    assert len(said) == 1, said
    if cls is FormatTooNew:  # exit 2, but its one line alone: nothing was used wrongly
        assert done.stderr.splitlines() == [f"boom FAILED: {error}"]
    elif cls.exit_code == EXIT_USAGE:
        assert said == [f"Error: {error}"]
        assert "Usage: group boom" in done.stderr
    else:
        assert said == [f"boom FAILED: {error}"]
    assert not done.stdout and "Traceback" not in done.stderr


def test_a_message_with_control_characters_stays_on_one_line() -> None:
    @command()
    def boom() -> None:
        raise exceptions.StorageError("cannot write up/\x1b[2Jevil\nname.jpg")

    done = CliRunner().invoke(boom, [], catch_exceptions=False)
    assert done.exit_code == EXIT_FAILED
    assert done.stderr.count("\n") == 1 and "\x1b" not in done.stderr
    assert "cannot write up/" in done.stderr and "evil" in done.stderr  # said, made safe
