"""`gpu-operator apply-crds` and `gpu-operator delete-policies`: their command lines.

The Helm chart's hook Jobs run them from the operator's own image (it has no kubectl):
`apply-crds` before an upgrade, since Helm installs a chart's CRDs only on install, and
`delete-policies` before an uninstall: it deletes the release's ClusterPolicy with
foreground propagation, so the garbage collector removes every operand the policy owns
before the policy goes. The work is in `components.hooks`, imported when they run.
"""

from __future__ import annotations

import argparse

from components.commands import deferred

run_apply_crds = deferred("components.hooks", "run_apply_crds")
run_delete_policies = deferred("components.hooks", "run_delete_policies")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `apply-crds` and `delete-policies` to the `gpu-operator` command line."""
    apply = sub.add_parser(
        "apply-crds",
        help="server-side apply this version's CRDs to the cluster (Helm pre-upgrade hook)",
        description="Create or update the ClusterPolicy and NVIDIADriver CRDs in the cluster.",
    )
    apply.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster)")
    apply.set_defaults(handler=run_apply_crds)

    delete = sub.add_parser(
        "delete-policies",
        help="delete a Helm release's ClusterPolicies and wait until they are gone "
        "(Helm pre-delete hook)",
        description=(
            "Delete the ClusterPolicies that Helm's annotations (meta.helm.sh/release-name, "
            "meta.helm.sh/release-namespace) tie to one release, with foreground "
            "propagation, and wait until they are gone: the garbage collector deletes every "
            "object a policy owns (its operands) before the policy. Other ClusterPolicies "
            "are left alone."
        ),
    )
    delete.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster)")
    delete.add_argument("--release", required=True, metavar="NAME", help="the Helm release")
    delete.add_argument(
        "--release-namespace", required=True, metavar="NAMESPACE", help="its namespace"
    )
    delete.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="give up after this long (default 300)",
    )
    delete.set_defaults(handler=run_delete_policies)
