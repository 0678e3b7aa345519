"""`gpu-operator plan -f policy.yaml`: what it does (its command line is
`components.commands.plan`). Exit 0: nothing would change; 2: something would; 1: the file
is invalid (the lines `validate` prints) or the cluster cannot be read."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import pydantic

from components.errors import CommandError
from components.offline import CLUSTER_POLICY, validate_files
from components.plan._output import text
from components.plan._plan import PolicyPlan, plan_policy
from components.run import api_client

NOTHING, SOMETHING, INVALID = 0, 2, 1


def run_plan(args: argparse.Namespace) -> int:
    reports = validate_files([args.file])
    bad = [line for r in reports for line in r.lines() if not r.ok]
    if bad:
        for line in bad:
            print(line, file=sys.stderr)
        return INVALID
    documents = [d for r in reports for _, d in r.resources]
    policies = [d for d in documents if d.get("kind") == CLUSTER_POLICY.kind]
    if len(policies) != 1 or len(documents) != 1:
        print(f"{args.file}: a plan is made for exactly one ClusterPolicy", file=sys.stderr)
        return INVALID
    plan = asyncio.run(_plan(args, policies[0]))
    if args.output == "json":
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        for line in text(plan):
            print(line)
    return SOMETHING if plan.changes else NOTHING


async def _plan(args: argparse.Namespace, document: dict[str, object]) -> PolicyPlan:
    api = await api_client(args.kubeconfig)
    try:
        return await plan_policy(api, document, namespace=args.namespace)
    except pydantic.ValidationError as exc:
        raise CommandError(f"{args.file}: the spec cannot be read: {exc}") from None
    finally:
        await api.close()
