"""Which nodes go on: grouped by image, blocked per image, warned-only when unreachable."""

from __future__ import annotations

import base64
import json

import pytest

from components.api import UpgradeState
from components.offline import validate_text
from components.preflight import (
    BasicAuth,
    Check,
    Verdict,
    credentials_for,
    docker_config_auths,
    gate,
    parse_reference,
)
from components.upgrade import admit

from ..components.upgrade.builders import node, policy

pytestmark = pytest.mark.unit

UBUNTU = "127.0.0.1:5000/nvidia/driver:580.95.05-ubuntu22.04"
RHEL = "127.0.0.1:5000/nvidia/driver:580.95.05-rhel9"
NEEDS = {"u1": UBUNTU, "u2": UBUNTU, "r1": RHEL, "r2": RHEL}


def test_a_missing_image_holds_only_the_nodes_that_pull_it() -> None:
    checks = {
        UBUNTU: Check(UBUNTU, Verdict.PRESENT),
        RHEL: Check(RHEL, Verdict.MISSING, "no manifest"),
    }
    g = gate(NEEDS, checks, "Warn")
    assert g.blocked == {"r1", "r2"}
    status, reason, message = g.condition() or (None, None, "")
    assert (status, reason) == (True, "ImageMissing")
    assert f"image {RHEL} is missing" in message
    assert "nodes r1, r2" in message
    nodes = [node(n, UpgradeState.UPGRADE_REQUIRED) for n in sorted(NEEDS)]
    assert admit(nodes, policy(maxParallelUpgrades=0, maxUnavailable="100%"), hold=g.blocked) == [
        "u1",
        "u2",
    ]


def test_an_unreachable_registry_warns_unless_strict() -> None:
    checks = {
        image: Check(image, Verdict.UNREACHABLE, "connection refused") for image in NEEDS.values()
    }
    warn = gate(NEEDS, checks, "Warn")
    assert warn.blocked == frozenset()
    assert (warn.condition() or (None, None, ""))[:2] == (False, "RegistryUnreachable")
    strict = gate(NEEDS, checks, "Strict")
    assert strict.blocked == set(NEEDS)
    assert (strict.condition() or (None, None, ""))[:2] == (True, "RegistryUnreachable")
    assert gate(NEEDS, checks, "Off").blocked == frozenset()


def test_nodes_wait_for_their_image_s_first_answer() -> None:
    g = gate(NEEDS, {UBUNTU: Check(UBUNTU, Verdict.PRESENT), RHEL: None}, "Warn")
    assert g.pending == {"r1", "r2"}
    assert g.blocked == frozenset()
    assert g.condition() is None


def test_many_nodes_are_counted_not_all_named() -> None:
    needs = {f"node-{i:04d}": RHEL for i in range(1000)}
    g = gate(needs, {RHEL: Check(RHEL, Verdict.MISSING)}, "Warn")
    message = (g.condition() or (None, None, ""))[2]
    assert "and 990 more" in message
    assert len(message) < 1000


def test_references_and_pull_secret_credentials() -> None:
    hub = parse_reference("nvidia/driver:580-ubuntu22.04")
    assert (hub.host, hub.repository, hub.reference) == (
        "registry-1.docker.io",
        "nvidia/driver",
        "580-ubuntu22.04",
    )
    assert parse_reference("ubuntu:22.04").repository == "library/ubuntu"
    pinned = parse_reference("nvcr.io/nvidia/driver@sha256:" + "a" * 64)
    assert pinned.reference == "sha256:" + "a" * 64
    assert pinned.manifest_url.startswith("https://nvcr.io/v2/nvidia/driver/manifests/sha256:")
    assert parse_reference(RHEL).manifest_url.startswith("http://127.0.0.1:5000/")
    config = {
        "auths": {
            "https://index.docker.io/v1/": {"username": "hub", "password": "p"},
            "nvcr.io": {"auth": base64.b64encode(b"$oauthtoken:key").decode()},
        }
    }
    data = {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}
    auths = [docker_config_auths(data)]
    assert credentials_for(hub, auths) == BasicAuth("hub", "p")
    assert credentials_for(pinned, auths) == BasicAuth("$oauthtoken", "key")
    assert credentials_for(parse_reference(RHEL), auths) is None


@pytest.mark.parametrize(("mode", "ok"), [("Strict", True), ("Warn", True), ("Sometimes", False)])
def test_validate_knows_the_preflight_mode(mode: str, ok: bool) -> None:
    text = (
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"
        f"spec:\n  driver:\n    upgradePolicy:\n      preflight: {{mode: {mode}}}\n"
    )
    report = validate_text(text)
    assert (report.problems == []) is ok
    if not ok:
        assert "spec.driver.upgradePolicy.preflight.mode" in str(report.problems[0][1])
