"""What a policy's driver change would do to each node: restarted in place (the running
pod's `DRIVER_CONFIG_DIGEST` is the new template's), walked (cordon, drain, restart) in
the admission's order and in the rounds its limits allow, or held by pre-flight (the
image it would pull is not in its registry); and, for a new driver DaemonSet, where it
would first install.

The rules are the upgrade walk's: the digests as `components.upgrade` reads them, the
order of `admit` (unavailable nodes first, then by name), the limits of `counts`
(maxParallelUpgrades, maxUnavailable of the nodes the policy manages), and the images
checked and gated by `components.preflight` with the template's pull secrets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.api import ClusterPolicy
from components.plan._objects import ObjectChange
from components.preflight import (
    BasicAuth,
    ImageChecker,
    ImageRef,
    credentials_for,
    docker_config_auths,
    gate,
)
from components.upgrade import driver_image_of, max_unavailable, spec_digest, template_digest
from reconciler import (
    GVK,
    Object,
    labels_of,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)
from reconciler.kinds import NODE, POD


@dataclass(frozen=True)
class NodePlan:
    restart: tuple[str, ...] = ()
    """Restarted in place: no cordon, no drain."""
    walk: tuple[str, ...] = ()
    """Cordoned, drained and restarted, in this order."""
    install: tuple[str, ...] = ()
    """First install of a new driver DaemonSet."""
    held: tuple[str, ...] = ()
    """Kept where they are by pre-flight."""
    rounds: tuple[tuple[str, ...], ...] = ()
    """The admission rounds the limits allow (restarts and walks alike take a slot)."""
    auto_upgrade: bool = True
    preflight: str = ""
    """Pre-flight's finding (the `PreflightFailed` message), if any."""
    limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def touches(self) -> bool:
        return bool(self.restart or self.walk or self.install)

    def to_dict(self) -> dict[str, Any]:
        return {
            "restartInPlace": list(self.restart),
            "walk": list(self.walk),
            "install": list(self.install),
            "heldByPreflight": list(self.held),
            "rounds": [list(r) for r in self.rounds],
            "autoUpgrade": self.auto_upgrade,
            "preflight": self.preflight,
            "limits": dict(self.limits),
        }


async def node_plan(
    client: Any,
    namespace: str,
    policy: ClusterPolicy,
    driver_daemonsets: Sequence[tuple[Object | None, ObjectChange]],
    *,
    checker: ImageChecker | None = None,
) -> NodePlan:
    """`driver_daemonsets`: each driver DaemonSet that would change, as it is (None: new)
    and the change (whose `after` is what the server would store)."""
    nodes = {name_of(n): n for n in client.list(NODE)}
    restart: list[str] = []
    walk: list[str] = []
    install: list[str] = []
    needs: dict[str, str] = {}
    secrets_of: dict[str, tuple[str, ...]] = {}
    managed: set[str] = set()
    for live, change in driver_daemonsets:
        after = change.after or {}
        image = driver_image_of(after)
        if live is None:
            targets = [n for n in nodes.values() if _selects(after, n)]
            install += [name_of(n) for n in targets]
            touched = [name_of(n) for n in targets]
        else:
            by_node = await _driver_pods(client, live)
            managed |= set(by_node)
            if not any(f.startswith("spec.template") for f in change.fields):
                continue
            new = template_digest(after)
            touched = sorted(by_node)
            for node in touched:
                old = spec_digest(by_node[node].get("spec") or {})
                (restart if old is not None and old == new else walk).append(node)
        if image is not None:
            for node in touched:
                needs[node] = image[0]
            secrets_of[image[0]] = image[1]
    upgrade = policy.spec.driver.upgrade_policy
    held: frozenset[str] = frozenset()
    finding = ""
    if needs and upgrade.preflight.mode != "Off":
        checker = checker or ImageChecker()
        try:
            checks = {
                image: await checker.check(
                    image, _credentials(client, namespace, secrets), secrets=",".join(secrets)
                )
                for image, secrets in secrets_of.items()
            }
        finally:
            await checker.close()
        result = gate(needs, checks, upgrade.preflight.mode)
        held = result.blocked
        said = result.condition()
        finding = said[2] if said is not None and said[0] else ""
    moving = [n for n in sorted({*restart, *walk}) if n not in held]
    cap = max_unavailable(upgrade, len(managed))
    rounds = _rounds(moving, nodes, upgrade.max_parallel_upgrades, cap)
    return NodePlan(
        restart=tuple(sorted(restart)),
        walk=tuple(n for r in rounds for n in r if n in walk),
        install=tuple(sorted(install)),
        held=tuple(sorted(held)),
        rounds=rounds,
        auto_upgrade=upgrade.auto_upgrade,
        preflight=finding,
        limits={"maxParallelUpgrades": upgrade.max_parallel_upgrades, "maxUnavailable": cap},
    )


def _rounds(
    moving: Sequence[str], nodes: Mapping[str, Object], max_parallel: int, cap: int
) -> tuple[tuple[str, ...], ...]:
    """The admission's rounds, each waiting for the last to finish: unavailable nodes
    first (they cost no unavailability), then by name; a round takes at most
    `max_parallel` nodes (0: no limit) and `cap` available ones."""
    unavailable = {n for n in moving if _unavailable(nodes.get(n))}
    order = sorted(moving, key=lambda n: (n not in unavailable, n))
    rounds: list[tuple[str, ...]] = []
    while order:
        slots = math.inf if max_parallel == 0 else max_parallel
        budget = cap
        chosen: list[str] = []
        for node in order:
            if slots <= 0:
                break
            if node in unavailable:
                chosen.append(node)
                slots -= 1
            elif budget > 0:
                chosen.append(node)
                slots -= 1
                budget -= 1
        if not chosen:
            break  # maxUnavailable 0: the rest never start
        rounds.append(tuple(chosen))
        order = [n for n in order if n not in chosen]
    return tuple(rounds)


def _unavailable(node: Object | None) -> bool:
    if node is None:
        return False
    if (node.get("spec") or {}).get("unschedulable"):
        return True
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") != "True")
    return False


def _selects(ds: Object, node: Object) -> bool:
    selector = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "nodeSelector"
    ) or {}
    labels = labels_of(node)
    return all(labels.get(k) == v for k, v in selector.items())


async def _driver_pods(client: Any, ds: Object) -> dict[str, Object]:
    """The DaemonSet's pods by node, read from the server (the cache trims pod specs)."""
    uid = uid_of(ds)
    out: dict[str, Object] = {}
    for pod in await client.list_live(POD, namespace=namespace_of(ds)):
        owners = owner_references_of(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and any(o.get("uid") == uid for o in owners):
            out[str(node)] = pod
    return out


def _credentials(client: Any, namespace: str, names: Sequence[str]) -> Any:
    async def find(ref: ImageRef) -> BasicAuth | None:
        auths = []
        for name in names:
            try:
                secret = await client.get_live(GVK("", "v1", "Secret"), name, namespace)
            except Exception:  # a missing or forbidden secret: ask without it
                continue
            auths.append(docker_config_auths(secret.get("data") or {}))
        return credentials_for(ref, auths)

    return find
