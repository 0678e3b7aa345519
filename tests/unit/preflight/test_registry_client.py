"""The OCI client against registries in this process (aiohttp servers that behave as
registries do: anonymous, Basic, Bearer token flow, HEAD refused) and against nothing."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from components.preflight import (
    MANIFEST_TYPES,
    TTL,
    BasicAuth,
    ImageChecker,
    RegistryClient,
    Verdict,
    credentials_for,
    docker_config_auths,
    parse_reference,
)

pytestmark = pytest.mark.unit

TAGS = {"nvidia/driver": {"580.95.05-ubuntu22.04"}}


def _manifest_handler(seen: list[web.Request]) -> Callable[[web.Request], Any]:
    async def manifest(request: web.Request) -> web.Response:
        seen.append(request)
        name, ref = request.match_info["name"], request.match_info["ref"]
        if ref in TAGS.get(name, set()):
            return web.Response(status=200, content_type="application/vnd.oci.image.index.v1+json")
        return web.Response(status=404)

    return manifest


async def _serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _guarded(
    seen: list[web.Request], allow: Callable[[web.Request], bool], challenge: str
) -> web.Application:
    inner = _manifest_handler(seen)

    async def manifest(request: web.Request) -> web.Response:
        if not allow(request):
            seen.append(request)
            return web.Response(status=401, headers={"WWW-Authenticate": challenge})
        return await inner(request)

    app = web.Application()
    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", manifest)
    return app


@pytest.fixture
async def anonymous() -> AsyncIterator[tuple[str, list[web.Request]]]:
    seen: list[web.Request] = []
    app = web.Application()
    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", _manifest_handler(seen))
    async for host in _serve(app):
        yield host, seen


async def test_a_present_tag_is_present_and_a_missing_one_missing(
    anonymous: tuple[str, list[web.Request]],
) -> None:
    host, seen = anonymous
    client = RegistryClient()
    try:
        there = await client.check(parse_reference(f"{host}/nvidia/driver:580.95.05-ubuntu22.04"))
        gone = await client.check(parse_reference(f"{host}/nvidia/driver:580.95.05-rhel9"))
    finally:
        await client.close()
    assert there.verdict is Verdict.PRESENT
    assert gone.verdict is Verdict.MISSING
    assert "580.95.05-rhel9" in gone.detail
    # Asked with HEAD, accepting OCI and Docker manifests and indexes.
    assert {r.method for r in seen} == {"HEAD"}
    assert seen[0].headers["Accept"] == MANIFEST_TYPES
    for media in ("oci.image.index", "oci.image.manifest", "manifest.list.v2", "manifest.v2"):
        assert media in seen[0].headers["Accept"]


async def test_basic_auth_with_the_pull_secret_and_denied_without() -> None:
    seen: list[web.Request] = []
    good = BasicAuth("robot", "s3cret").header()
    app = _guarded(seen, lambda r: r.headers.get("Authorization") == good, 'Basic realm="reg"')
    async for host in _serve(app):
        secret = {
            ".dockerconfigjson": base64.b64encode(
                json.dumps(
                    {"auths": {f"https://{host}/v1/": {"auth": _b64("robot:s3cret")}}}
                ).encode()
            ).decode()
        }
        ref = parse_reference(f"{host}/nvidia/driver:580.95.05-ubuntu22.04")
        creds = credentials_for(ref, [docker_config_auths(secret)])
        client = RegistryClient()
        try:
            with_secret = await client.check(ref, creds)
            without = await client.check(ref, None)
            wrong = await client.check(ref, BasicAuth("robot", "nope"))
        finally:
            await client.close()
    assert creds == BasicAuth("robot", "s3cret")
    assert with_secret.verdict is Verdict.PRESENT
    # A registry that refuses us says nothing about whether the image is there.
    assert without.verdict is Verdict.DENIED
    assert wrong.verdict is Verdict.DENIED


async def test_bearer_token_flow_fetches_a_token_for_the_repository_scope() -> None:
    seen: list[web.Request] = []
    token_asks: list[web.Request] = []
    host_box: list[str] = []

    async def token(request: web.Request) -> web.Response:
        token_asks.append(request)
        if request.headers.get("Authorization") != BasicAuth("u", "p").header():
            return web.Response(status=401)
        return web.json_response({"token": "tok-" + request.query["scope"]})

    def allow(r: web.Request) -> bool:
        return r.headers.get("Authorization") == "Bearer tok-repository:nvidia/driver:pull"

    def challenge() -> str:
        return (
            f'Bearer realm="http://{host_box[0]}/token",service="reg.test",'
            'scope="repository:nvidia/driver:pull"'
        )

    inner = _manifest_handler(seen)

    async def manifest(request: web.Request) -> web.Response:
        if not allow(request):
            return web.Response(status=401, headers={"WWW-Authenticate": challenge()})
        return await inner(request)

    app = web.Application()
    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", manifest)
    app.router.add_get("/token", token)
    async for host in _serve(app):
        host_box.append(host)
        client = RegistryClient()
        try:
            present = await client.check(
                parse_reference(f"{host}/nvidia/driver:580.95.05-ubuntu22.04"), BasicAuth("u", "p")
            )
            missing = await client.check(
                parse_reference(f"{host}/nvidia/driver:580.95.05-rhel9"), BasicAuth("u", "p")
            )
            anonymous = await client.check(
                parse_reference(f"{host}/nvidia/driver:580.95.05-ubuntu22.04"), None
            )
        finally:
            await client.close()
    assert present.verdict is Verdict.PRESENT
    assert missing.verdict is Verdict.MISSING
    assert anonymous.verdict is Verdict.DENIED
    assert token_asks[0].query["service"] == "reg.test"
    assert token_asks[0].query["scope"] == "repository:nvidia/driver:pull"


async def test_a_registry_that_refuses_head_is_asked_with_get() -> None:
    seen: list[web.Request] = []
    inner = _manifest_handler(seen)

    async def manifest(request: web.Request) -> web.Response:
        if request.method == "HEAD":
            return web.Response(status=405)
        return await inner(request)

    app = web.Application()
    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", manifest)
    async for host in _serve(app):
        client = RegistryClient()
        try:
            check = await client.check(parse_reference(f"{host}/nvidia/driver:580.95.05-rhel9"))
        finally:
            await client.close()
    assert check.verdict is Verdict.MISSING
    assert [r.method for r in seen] == ["GET"]


async def test_nothing_listening_and_a_5xx_are_unreachable_not_missing() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = web.Application()

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=503)

    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", broken)
    client = RegistryClient(timeout=2.0)
    try:
        closed = await client.check(parse_reference(f"127.0.0.1:{port}/nvidia/driver:1-rhel9"))
        async for host in _serve(app):
            overloaded = await client.check(parse_reference(f"{host}/nvidia/driver:1-rhel9"))
    finally:
        await client.close()
    assert closed.verdict is Verdict.UNREACHABLE
    assert overloaded.verdict is Verdict.UNREACHABLE
    assert "503" in overloaded.detail


async def test_a_thousand_lookups_of_one_image_send_one_check(
    anonymous: tuple[str, list[web.Request]],
) -> None:
    host, seen = anonymous
    checker = ImageChecker()

    async def no_credentials(ref: Any) -> None:
        return None

    image = f"{host}/nvidia/driver:580.95.05-rhel9"
    try:
        assert all(checker.lookup(image, no_credentials) is None for _ in range(1000))
        check = await checker.check(image, no_credentials)
        assert check.verdict is Verdict.MISSING
        assert checker.lookup(image, no_credentials) == check
    finally:
        await checker.close()
    assert len(seen) == 1
    assert checker.requests == 1


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_a_missing_verdict_is_asked_again_after_its_ttl_and_a_push_is_seen(
    anonymous: tuple[str, list[web.Request]],
) -> None:
    host, seen = anonymous
    now = [1000.0]
    changes: list[int] = []
    checker = ImageChecker(
        ttl=TTL(present=300, missing=10, unreachable=60),
        clock=lambda: now[0],
        on_change=lambda: changes.append(1),
    )

    async def no_credentials(ref: Any) -> None:
        return None

    image = f"{host}/nvidia/driver:590.48.01-rhel9"
    try:
        assert (await checker.check(image, no_credentials)).verdict is Verdict.MISSING
        assert checker.next_expiry() == 10
        TAGS["nvidia/driver"].add("590.48.01-rhel9")  # pushed
        now[0] += 5
        assert checker.lookup(image, no_credentials).verdict is Verdict.MISSING  # type: ignore[union-attr]
        assert len(seen) == 1  # still fresh: not asked again
        now[0] += 6
        # Expired: the old verdict still answers while the refresh runs, then the new one.
        assert checker.lookup(image, no_credentials).verdict is Verdict.MISSING  # type: ignore[union-attr]
        assert (await checker.check(image, no_credentials)).verdict is Verdict.PRESENT
        assert checker.next_expiry() is None
    finally:
        TAGS["nvidia/driver"].discard("590.48.01-rhel9")
        await checker.close()
    assert len(seen) == 2
    assert len(changes) == 2
