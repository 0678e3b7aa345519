"""What the Helm chart's hook Jobs do (their command lines: `components.commands.hooks`).

`apply-crds` server-side applies the CRDs rendered from this version's models, the same
documents as the chart's crds/.

`delete-policies` deletes the ClusterPolicies and GPUClusters of one Helm release, and no
other: those whose annotations `meta.helm.sh/release-name` and
`meta.helm.sh/release-namespace` (written by Helm on every object of a release) name it. It
deletes them with foreground propagation and waits until they are gone. For a ClusterPolicy
the operator holds no finalizer: every object it creates for
a policy names the policy as its owner (an ownerReference with blockOwnerDeletion), so the
API server's garbage collector (kube-controller-manager) deletes those objects first, a
DaemonSet's pods before the DaemonSet, and removes the policy only once they are gone. When
this returns, nothing the policy owned is left and the uninstall may remove the operator;
the operator need not be running for it. A GPUCluster is the one exception: the operator
holds its finalizer while ResourceClaims on its GPUs are allocated, so it must go while the
operator still runs, which is why this pre-delete hook deletes it rather than Helm's own
deletion of the release's objects (that would remove the operator at the same moment).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from typing import Any

from components.errors import CommandError
from components.kinds import CLUSTER_POLICY, GPU_CLUSTER
from components.offline import KINDS, crd
from components.run import api_client, plain_client
from reconciler import GVK, Client, Object, annotations_of, name_of, uid_of
from reconciler.errors import ApiError, ApiUnreachable, NotFound

log = logging.getLogger("components.hooks")
FIELD_MANAGER = "gpu-operator-hooks"
# Polled, not watched: a one-off Job that waits at most minutes for one or two objects.
POLL_SECONDS = 2.0
RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
RELEASE_KINDS: tuple[GVK, ...] = (CLUSTER_POLICY, GPU_CLUSTER)
"""What the pre-delete hook deletes of its release, in this order."""


def _client(api: Any) -> Client:
    return plain_client(api, FIELD_MANAGER)


async def apply_crds(kubeconfig: str | None) -> None:
    async with await api_client(kubeconfig) as api:
        client = _client(api)
        for kind in KINDS:
            await client.apply(crd(kind))


def of_release(policy: Object, release: str, namespace: str) -> bool:
    """Whether Helm's annotations say `policy` belongs to release `namespace/release`."""
    annotations = annotations_of(policy)
    return (
        annotations.get(RELEASE_NAME) == release and annotations.get(RELEASE_NAMESPACE) == namespace
    )


async def _present(client: Client, kind: GVK, name: str, uid: str) -> bool:
    try:
        live = await client.get_live(kind, name)
    except NotFound:
        return False
    return uid_of(live) == uid


async def _of_kind(client: Client, kind: GVK) -> list[Object]:
    """Every object of `kind`; none where its CRD is not served (a GPUCluster CRD removed
    by hand, an older chart's CRDs)."""
    try:
        return await client.list_live(kind)
    except NotFound:
        return []


async def delete_policies(
    kubeconfig: str | None, release: str, namespace: str, seconds: float
) -> list[str]:
    """Delete the ClusterPolicies and GPUClusters of Helm release `namespace/release`
    (foreground: the garbage collector removes what each owns before it); return those
    still present after `seconds` as "Kind name" ([]: all gone, and everything they owned)."""
    deadline = time.monotonic() + seconds
    async with await api_client(kubeconfig) as api:
        client = _client(api)
        deleting: dict[tuple[GVK, str], str] = {}
        for kind in RELEASE_KINDS:
            for obj in await _of_kind(client, kind):
                name = name_of(obj)
                if not of_release(obj, release, namespace):
                    log.info(
                        "%s %s: not of release %s/%s, left alone",
                        kind.kind,
                        name,
                        namespace,
                        release,
                    )
                    continue
                uid = uid_of(obj)
                await client.delete(
                    kind, name, propagation_policy="Foreground", uid=uid, missing_ok=True
                )
                deleting[kind, name] = uid
        while True:
            left = [key for key, uid in deleting.items() if await _present(client, *key, uid)]
            if not left or time.monotonic() >= deadline:
                break
            log.debug("waiting for %s and what they own to be deleted", left)
            await asyncio.sleep(POLL_SECONDS)
        for kind, name in deleting.keys() - set(left):
            log.info("%s %s is gone, after every object it owned", kind.kind, name)
        return [f"{kind.kind} {name}" for kind, name in left]


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def run_apply_crds(args: argparse.Namespace) -> int:
    _logging()
    try:
        asyncio.run(apply_crds(args.kubeconfig))
    except (ApiUnreachable, ApiError) as exc:
        raise CommandError(f"could not apply the CRDs: {exc}") from exc
    return 0


def run_delete_policies(args: argparse.Namespace) -> int:
    _logging()
    try:
        left = asyncio.run(
            delete_policies(args.kubeconfig, args.release, args.release_namespace, args.timeout)
        )
    except (ApiUnreachable, ApiError) as exc:
        raise CommandError(f"could not delete the release's policies: {exc}") from exc
    if left:
        raise CommandError(still_present(left, args.release_namespace, args.timeout))
    return 0


def still_present(names: list[str], namespace: str, seconds: float) -> str:
    """The hook's failure: which policies the garbage collector (or, for a GPUCluster, the
    operator's finalizer) still holds, and what to do."""
    claims = (
        " A GPUCluster also waits while ResourceClaims on its GPUs are allocated: its Ready "
        "condition names them; delete the pods that hold them."
        if any(n.startswith(f"{GPU_CLUSTER.kind} ") for n in names)
        else ""
    )
    return (
        f"{', '.join(sorted(names))} still present after {seconds:.0f}s: the "
        "garbage collector (kube-controller-manager) removes it only after every object it "
        "owns; check that kube-controller-manager runs and what `kubectl get daemonsets,pods "
        f"-n {namespace}` shows still terminating, then run `helm uninstall` again.{claims}"
    )
