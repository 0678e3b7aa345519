"""`gpu-operator plan`: its command line. The work is in `components.plan.commands`,
imported when it runs."""

from __future__ import annotations

import argparse

from components.commands import add_cluster_flags, deferred

run_plan = deferred("components.plan.commands", "run_plan")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `plan` to the `gpu-operator` command line."""
    parser = sub.add_parser(
        "plan",
        help="show what applying a ClusterPolicy would change, without changing anything",
        description=(
            "Read the live cluster and print what applying the ClusterPolicy in FILE would "
            "do: objects created, changed (which fields) or deleted; nodes whose driver "
            "restarts in place, is walked (in what rounds) or is held by pre-flight. Exits "
            "0 when nothing would change, 2 when something would, 1 when FILE is invalid."
        ),
    )
    parser.add_argument("-f", "--file", required=True, metavar="FILE", help="the policy")
    parser.add_argument(
        "--output", choices=("text", "json"), default="text", help="text (default) or json"
    )
    add_cluster_flags(parser)
    parser.set_defaults(handler=run_plan)
