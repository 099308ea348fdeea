"""The error hierarchy of imgwarm, in one place: every class imgwarm raises on purpose.

Each class says how the command line ends on it (``exit_code``: 2 for what the user gave,
a setting, an option, a key; 1 for work that failed). Whether trying again may cure it is
said by type, as httpx groups its retryable errors: a ``TransientError`` may pass (queued
jobs retry it, with backoff: workers/task.py's ``autoretry_for``), and nothing else is
retried. The CLI maps them in one place (imgwarm/cli/common.py): one line on stderr, that
exit status.

ImgwarmError                      exit 1  the base: anything not said below
├── SettingsError                 exit 2  a setting or option is out of range or malformed;
│   │                                     the message names the setting and its allowed forms
│   ├── ConfigValueError          exit 2  a value that cannot go into an nginx config safely
│   └── LogFormatError            exit 2  a log_format that cannot tell warm what it needs
├── LayoutError                   exit 2  a key or path would escape a root, or is unsafe
├── FormatTooNew                  exit 2  the store or index is in a format newer than this
│                                         code knows: nothing was written or removed
├── SourceError                   exit 1  this source cannot be turned into variants (the
│   │                                     batch goes on); str() is "<source>: <what is wrong>"
│   ├── UnreadableSource                  cannot be read at all (missing, permission, a folder)
│   ├── UnsupportedFormat                 the bytes are not a format we accept (sniffed)
│   ├── LimitExceeded                     file size or pixel count over the limit (the header)
│   ├── CorruptImage                      header or pixel data damaged, or an unsupported coding
│   ├── DecoderCrashed                    the process making it died (a native crash)
│   │   └── JobTimedOut                   it ran past job_timeout: its process was stopped
│   ├── NoWorker                          no worker process could be started (may pass)
│   └── RefusedBefore                     the same bytes were refused before (reason recorded)
├── StorageError                  exit 1  writing to or reading from the origin or stores failed
│   └── TransientStorageError     exit 1  S3 5xx, timeout, connection, a full disk (also a
│                                         TransientError)
├── TransientError                exit 1  may pass: queued jobs retry it, with backoff
│   ├── TransientStorageError             (above)
│   ├── BrokerError                       the queue (Redis) cannot be reached
│   └── WarmBusy                          another warm run holds these tiers
├── ObjectTooLarge                exit 1  a stored object is over the size a read allows
├── TooDeep                       exit 1  a JSON or TOML text nested deeper than its format needs
├── JobFailed                     exit 1  a queued job ended in failure (its one line)
├── NginxError                    exit 1  nginx refused the config, is missing, or cannot do it
├── PagesError                    exit 1  a pages file that cannot be read or names the unknown
├── PictureError                  exit 1  a manifest that cannot make a safe <picture> tag
├── UnknownSource                 exit 1  delete: nothing is known of the key
├── NotAnOriginal                 exit 1  delete with original: the key names a folder
└── MalformedEvent                exit 1  listen: a bucket notification that cannot be read

Light on purpose: no imports, so anything (the CLI's listing, a worker) can load it.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILED = 1  # the work failed (the other sources of a batch are still done)
EXIT_USAGE = 2  # what the user gave is wrong: nothing was done


def about(subject: str, error: BaseException) -> str:
    """The error's one line, starting with what it is about (``<key>: <what is wrong>``)."""
    message = str(error)
    return message if message.startswith(subject) else f"{subject}: {message}"


class ImgwarmError(Exception):
    """Base of every error imgwarm raises on purpose."""

    exit_code: ClassVar[int] = EXIT_FAILED


class TransientError(ImgwarmError):
    """A fault that may pass: trying again may cure it. Queued jobs retry every one of these,
    with backoff (and nothing else: a bad image is never retried)."""


class SettingsError(ImgwarmError):
    """A setting or option is invalid; the message names it and its allowed range."""

    exit_code = EXIT_USAGE


class ConfigValueError(SettingsError):
    """A value that cannot be written into an nginx config safely (the message names the
    setting or option that holds it)."""


class LogFormatError(SettingsError, ValueError):
    """The log format cannot tell imgwarm what it needs (it names what is missing)."""


class LayoutError(ImgwarmError):
    """A path would leave its root, a key is unsafe, or a folder would exceed its limit."""

    exit_code = EXIT_USAGE


class FormatTooNew(ImgwarmError):
    """A store (its ``imgwarm-format.json``) or a cache box's index (its ``PRAGMA
    user_version``) is in a format newer than this code knows, for what the command does: it
    stops before writing or removing anything. The line names both versions. Never transient
    for a command; the worker leaves such a job queued for a newer worker
    (docs/architecture.md, "Formats and versions")."""

    exit_code = EXIT_USAGE


class SourceError(ImgwarmError):
    """A source image cannot be processed. Permanent: retrying will not help."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason

    def __reduce__(self) -> tuple[type[SourceError], tuple[str, str]]:
        # Rebuilt from both parts when it crosses a process boundary (pipeline/isolate.py).
        return type(self), (self.source, self.reason)


class UnreadableSource(SourceError):
    """The source cannot be opened or read."""


class UnsupportedFormat(SourceError):
    """The source's bytes are not an accepted image format."""


class LimitExceeded(SourceError):
    """The source is larger than a configured limit (checked before decoding)."""


def too_large(source: str, size: int, limit: int) -> LimitExceeded:
    return LimitExceeded(
        source, f"file is {size:,} bytes, over the limit of {limit:,} (max_bytes)"
    )


class CorruptImage(SourceError):
    """The source's header or pixel data is damaged, or its coding is unsupported."""


class DecoderCrashed(SourceError):
    """The worker process making this source died (a signal from a native library: libjpeg,
    libwebp, lcms...). Only this source fails; nothing of it was written."""


class JobTimedOut(DecoderCrashed):
    """The source's pixel work ran past its deadline (job_timeout): its worker process was
    stopped, and the next source gets a new one. Not held against these bytes: the machine
    may have been busy."""


class NoWorker(SourceError):
    """No worker process could be started to make this source (out of memory, a limit on
    processes): nothing is wrong with the source, and it may pass (not recorded against
    its bytes)."""


class RefusedBefore(SourceError):
    """These very bytes were refused before, with the same settings and decoders: the reason
    recorded then is given again, without decoding them."""


class StorageError(ImgwarmError):
    """Reading or writing stored files failed (disk full, permissions...)."""


class TransientStorageError(StorageError, TransientError):
    """A storage fault that may pass: S3 5xx or throttling, timeouts, refused connections,
    a full disk."""


class ObjectTooLarge(ImgwarmError):
    """What a Store's ``read`` raises over its ``limit``, found before the bytes are read."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


class TooDeep(ImgwarmError, ValueError):
    """Arrays and objects nested deeper than the format needs."""


class BrokerError(TransientError):
    """The broker or result backend cannot be reached; the message says what was not queued."""


class JobFailed(ImgwarmError):
    """A queued job failed for good. Raised by the worker's task with the message only, so
    that Celery's JSON serializer can carry it to whoever waits on the job."""


class WarmBusy(TransientError):
    """Another warm run holds these tiers."""


class NginxError(ImgwarmError):
    """nginx refused the config, or the config asks for what this nginx cannot do."""


class PagesError(ImgwarmError):
    """A pages file that cannot be read, or names what imgwarm does not have."""


class PictureError(ImgwarmError):
    """A manifest that cannot make a safe tag (names what is wrong)."""


class UnknownSource(ImgwarmError):
    """No manifest, failure or tombstone for the key: nothing to delete."""


class NotAnOriginal(ImgwarmError):
    """``original`` names a folder (or an S3 prefix holding objects), not one file."""


class MalformedEvent(ImgwarmError):
    """A bucket notification that is not JSON, too big, too deep, or not of a known shape
    (`imgwarm listen` logs its one line, counts it and goes on)."""
