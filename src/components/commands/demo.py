"""`gpu-operator demo`: its command line. The demo itself is the simulator's
(`gpusim._demo`), imported by name when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from components.commands import deferred

REPO_CONFIG = Path(__file__).resolve().parents[3] / "config"

run_demo = deferred("gpusim._demo", "run_demo")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "demo", help="a simulated GPU cluster with the operator on it, until Ctrl-C"
    )
    parser.add_argument("--nodes", type=int, default=4, help="GPU nodes (default 4)")
    parser.add_argument("--cpu-nodes", type=int, default=2, help="CPU-only nodes (default 2)")
    parser.add_argument(
        "--os", default="ubuntu22.04,rhel9.4", help="OS releases the GPU nodes cycle through"
    )
    parser.add_argument(
        "--policy",
        default=str(REPO_CONFIG / "samples" / "nvidia_v1_clusterpolicy_minimal.yaml"),
        help="the ClusterPolicy to create (not with --dra)",
    )
    parser.add_argument(
        "--dra",
        action="store_true",
        help="the DRA stack instead: a GPUCluster, and a pod claiming a GPU through a "
        "ResourceClaimTemplate",
    )
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds to wait for ready (default 600)"
    )
    parser.set_defaults(handler=run_demo)
