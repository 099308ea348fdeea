"""The error hierarchy of imgwarm, in one place.

ImgwarmError
├── SettingsError        a setting or option is out of range or malformed (CLI exit 2)
├── SourceError          this source cannot be turned into variants (CLI exit 1, batch goes on)
│   ├── UnreadableSource     cannot be read at all (missing, permission, not a regular file)
│   ├── UnsupportedFormat    the bytes are not a format we accept (sniffed, never by name)
│   ├── LimitExceeded        file size or pixel count over the limit, found on the header
│   ├── CorruptImage         header or pixel data is damaged or uses an unsupported coding
│   ├── DecoderCrashed       the process making it died (a native crash): this source alone
│   └── RefusedBefore        the same bytes were refused before (reason recorded in the store)
├── LayoutError          a key or path would escape a root, or a folder would overflow
├── StorageError         writing to or reading from the origin or manifest store failed
│   └── TransientStorageError   a fault that retrying may cure (S3 5xx, timeout, connection)
├── BrokerError          the queue (Redis) cannot be reached: nothing was queued
└── JobFailed            a queued job ended in failure (its message is the one clear line)

Every SourceError carries the source it is about, so its str() is the one clear line that
DESIGN.md asks for: "<source>: <what is wrong>".
"""

from __future__ import annotations


class ImgwarmError(Exception):
    """Base of every error imgwarm raises on purpose."""


class SettingsError(ImgwarmError):
    """A setting or option is invalid; the message names it and its allowed range."""


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


class RefusedBefore(SourceError):
    """These very bytes were refused before, with the same settings and decoders: the reason
    recorded then is given again, without decoding them."""


class LayoutError(ImgwarmError):
    """A path would leave its root, or a folder would exceed its entry limit."""


class StorageError(ImgwarmError):
    """Reading or writing stored files failed (disk full, permissions...)."""


class TransientStorageError(StorageError):
    """A storage fault that may pass: S3 5xx or throttling, timeouts, refused connections.
    Queued jobs retry on it, with backoff."""


class BrokerError(ImgwarmError):
    """The broker or result backend cannot be reached; the message says what was not queued."""


class JobFailed(ImgwarmError):
    """A queued job failed for good. Raised by the worker's task with the message only, so
    that Celery's JSON serializer can carry it to whoever waits on the job."""
