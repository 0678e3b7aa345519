"""`gpu-operator plan` against a real API server with the operator running: the plan of a
policy change names the objects and fields the apply then changes, no more and no fewer;
after the apply nothing is left to plan; the exit codes; an invalid file's errors are
`validate`'s."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.offline import validate_files
from components.plan import plan_policy
from components.plan._fields import changed_fields, comparable
from components.upgrade import template_digest
from reconciler.envtest import ControlPlane
from tests.integration.components.controllers.conftest import CLUSTER_POLICY, Cluster

pytestmark = pytest.mark.integration

Key = tuple[str, str, str]


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _owned(cluster: Cluster) -> dict[Key, dict[str, Any]]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): comparable(o)
        for o in await cluster.owned()
    }


async def _running_policy(cluster: Cluster) -> str:
    await cluster.add_node("gpu-1")
    name = cluster.name("cp")
    await cluster.create_policy("cp", {})
    await cluster.settle()
    return name


async def test_the_planned_changes_are_exactly_what_the_apply_changes(cluster: Cluster) -> None:
    name = await _running_policy(cluster)
    spec = {"daemonsets": {"labels": {"team": "ml"}}, "dcgmExporter": {"enabled": False}}
    before = await _owned(cluster)

    plan = await plan_policy(cluster.api, _policy(name, spec), namespace=cluster.namespace)

    assert plan.changes
    assert await _owned(cluster) == before  # planning wrote nothing
    planned = {
        (c.kind, c.namespace, c.name): (c.action, set(c.fields))
        for c in plan.objects
        if c.kind != "ClusterPolicy"
    }
    [own] = [c for c in plan.objects if c.kind == "ClusterPolicy"]
    assert own.action == "changed"
    assert {"spec.daemonsets.labels.team", "spec.dcgmExporter.enabled"} <= set(own.fields)
    assert {a for a, _ in planned.values()} == {"changed", "deleted"}
    policy_before = await cluster.get(CLUSTER_POLICY, name)

    await cluster.patch_policy(name, spec)
    await cluster.settle()
    after = await _owned(cluster)
    policy_after = await cluster.get(CLUSTER_POLICY, name)
    assert policy_before is not None and policy_after is not None
    assert own.fields == tuple(changed_fields(policy_before["spec"], policy_after["spec"], "spec"))

    happened: dict[Key, tuple[str, set[str]]] = {}
    for key in before.keys() | after.keys():
        if key not in after:
            happened[key] = ("deleted", set())
        elif key not in before:
            happened[key] = ("created", set())
        else:
            fields = set(changed_fields(before[key], after[key]))
            if fields:
                happened[key] = ("changed", fields)
    assert happened == planned
    # A label on every operand pod: each DaemonSet changed, in its pod template.
    daemonsets = [k for k in after if k[0] == "DaemonSet"]
    assert daemonsets, planned
    assert all("spec.template.metadata.labels.team" in planned[k][1] for k in daemonsets), planned

    again = await plan_policy(cluster.api, _policy(name, spec), namespace=cluster.namespace)
    assert not again.changes and again.objects == ()


async def _cli(control_plane: ControlPlane, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "components.cli",
        "plan",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_exit_codes_json_and_an_invalid_file(
    cluster: Cluster, control_plane: ControlPlane, tmp_path: Path
) -> None:
    name = await _running_policy(cluster)
    file = tmp_path / "policy.yaml"
    spec = {"daemonsets": {"labels": {"team": "ml"}}}
    file.write_text(yaml.safe_dump(_policy(name, spec)))
    ns = ("--namespace", cluster.namespace)

    code, out, _ = await _cli(control_plane, "-f", str(file), *ns, "--output", "json")
    assert code == 2
    found = json.loads(out)
    assert found["changes"] is True and found["policy"] == name
    assert any(o["action"] == "changed" for o in found["objects"])

    await cluster.patch_policy(name, spec)
    await cluster.settle()
    code, out, _ = await _cli(control_plane, "-f", str(file), *ns)
    assert (code, out.strip().splitlines()[-1]) == (0, "Nothing would change.")

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_policy(name, {"driver": {"enabled": "maybe"}})))
    code, out, err = await _cli(control_plane, "-f", str(bad), *ns)
    expected = [line for r in validate_files([str(bad)]) for line in r.lines()]
    assert code == 1 and out == ""
    assert expected and err.splitlines() == expected


def driver_pod(ds: dict[str, Any], node: str, digest: str | None) -> dict[str, Any]:
    env = [{"name": "DRIVER_CONFIG_DIGEST", "value": digest}] if digest else []
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"driver-{node}",
            "namespace": ds["metadata"]["namespace"],
            "labels": dict(ds["spec"]["selector"]["matchLabels"]),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": ds["metadata"]["name"],
                    "uid": ds["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nvidia-driver-ctr", "image": "driver:old", "env": env}],
        },
    }


async def test_nodes_restart_in_place_or_walk_in_rounds_or_are_held(cluster: Cluster) -> None:
    """Three driver pods: one installed with the template's DRIVER_CONFIG_DIGEST (a pod
    label changes nothing it installs: restart in place), one with another digest and one
    with none (walked). One node at a time: three rounds, the restart's first by name. The
    registry cannot be reached: Warn lets them go, Strict holds them all."""
    nodes = [await cluster.add_node(f"gpu-{i}") for i in (1, 2, 3)]
    name = cluster.name("cp")
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 3}
    spec: dict[str, Any] = {
        "driver": {"repository": "127.0.0.1:1/nvidia", "upgradePolicy": upgrade}
    }
    await cluster.create_policy("cp", spec)
    await cluster.settle()
    [ds] = [d for d in (await cluster.daemonsets()).values() if "driver" in d["metadata"]["name"]]
    digest = template_digest(ds)
    assert digest is not None
    for node, d in zip(nodes, (digest, "an-older-config", None), strict=True):
        await cluster.client.create(driver_pod(ds, node, d))

    labelled = {**spec, "daemonsets": {"labels": {"team": "ml"}}}
    plan = await plan_policy(cluster.api, _policy(name, labelled), namespace=cluster.namespace)
    assert plan.nodes.restart == (nodes[0],)
    assert plan.nodes.walk == (nodes[1], nodes[2])
    assert plan.nodes.rounds == ((nodes[0],), (nodes[1],), (nodes[2],))
    assert plan.nodes.held == ()

    strict = {
        "driver": {
            **labelled["driver"],
            "upgradePolicy": {**upgrade, "preflight": {"mode": "Strict"}},
        },
        "daemonsets": labelled["daemonsets"],
    }
    plan = await plan_policy(cluster.api, _policy(name, strict), namespace=cluster.namespace)
    assert plan.nodes.held == tuple(nodes)
    assert plan.nodes.rounds == ()
    assert "127.0.0.1:1/nvidia/driver" in plan.nodes.preflight
