"""The S3 servers a test can run on, as a parameter: moto's (a model of S3, with SQS for
bucket notifications) and SeaweedFS's (a real object store); the fixture of each by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.support.servers import S3Endpoint

# parameter -> the session fixture that starts that server (tests/support/fixtures.py)
S3_SERVERS = {"moto": "s3_server", "seaweedfs": "seaweedfs_server"}


def s3_params(*marks: Any, servers: tuple[str, ...] = tuple(S3_SERVERS)) -> list[Any]:
    """One parameter a server, each marked integration (and with ``marks``)."""
    return [pytest.param(name, marks=[pytest.mark.integration, *marks]) for name in servers]


def on_s3(origin: str) -> bool:
    """Is this origin parameter one of the S3 servers (else: the local folder)?"""
    return origin in S3_SERVERS


def s3_server(request: pytest.FixtureRequest, name: str) -> S3Endpoint:
    """The session's server of that name, started when first asked for."""
    server: S3Endpoint = request.getfixturevalue(S3_SERVERS[name])
    return server
