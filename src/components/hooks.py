"""What the Helm chart's hook Jobs do (their command lines: `components.commands.hooks`).

`apply-crds` server-side applies the CRDs rendered from this version's models, the same
documents as the chart's crds/. `delete-policies` deletes every ClusterPolicy and waits
until the API no longer has one: the operator's finalizer holds each policy until its
operands are gone, so when this returns the uninstall may remove the operator itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from typing import Any

from components.api import KINDS, crd
from components.errors import CommandError
from components.kinds import CLUSTER_POLICY
from components.run import api_client, plain_client
from reconciler import Client, name_of
from reconciler.errors import ApiError, ApiUnreachable

log = logging.getLogger("components.hooks")
FIELD_MANAGER = "gpu-operator-hooks"
# Polled, not watched: a one-off Job that waits at most minutes for one or two objects.
POLL_SECONDS = 2.0


def _client(api: Any) -> Client:
    return plain_client(api, FIELD_MANAGER)


async def apply_crds(kubeconfig: str | None) -> None:
    async with await api_client(kubeconfig) as api:
        client = _client(api)
        for kind in KINDS:
            await client.apply(crd(kind))


async def delete_policies(kubeconfig: str | None, seconds: float) -> int:
    """Delete every ClusterPolicy; return how many remain after `seconds` (0: all gone)."""
    deadline = time.monotonic() + seconds
    async with await api_client(kubeconfig) as api:
        client = _client(api)
        policies = await client.list_live(CLUSTER_POLICY)
        for policy in policies:
            await client.delete(CLUSTER_POLICY, name_of(policy), missing_ok=True)
        while policies and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            policies = await client.list_live(CLUSTER_POLICY)
            log.debug("waiting for %d ClusterPolicies to be released", len(policies))
        return len(policies)


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
        left = asyncio.run(delete_policies(args.kubeconfig, args.timeout))
    except (ApiUnreachable, ApiError) as exc:
        raise CommandError(f"could not delete the ClusterPolicies: {exc}") from exc
    if left:
        raise CommandError(
            f"{left} ClusterPolicy still present after {args.timeout:.0f}s: is the operator "
            "running? Its finalizer removes the operands before the policy goes."
        )
    return 0
