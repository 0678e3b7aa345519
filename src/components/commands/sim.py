"""`gpu-operator sim up|down|status`: its command line. The work is the simulator's
(`gpusim._cli`), imported by name when one of them runs.

Defaults that belong to the simulator (the GPU product, the container runtime) are left to
it: an unset flag is `None` here, so no simulator fact is written twice."""

from __future__ import annotations

import argparse

from components.commands import deferred

run_up = deferred("gpusim._cli", "run_up")
run_down = deferred("gpusim._cli", "run_down")
run_status = deferred("gpusim._cli", "run_status")
run_gpu_error = deferred("gpusim._cli", "run_gpu_error")
run_failing_driver = deferred("gpusim._cli", "run_failing_driver")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "sim", help="a local simulated GPU cluster (kwok nodes with simulated NVIDIA GPUs)"
    )
    actions = parser.add_subparsers(dest="sim_action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="start a simulated cluster in the background; prints the kubeconfig path",
        description="Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, "
        "kwok and the GPU node behaviour, create the nodes, wait until they are Ready and "
        "print the kubeconfig path (last line). The cluster runs until `sim down`.",
    )
    up.add_argument("--nodes", type=int, default=4, help="GPU nodes (default 4)")
    up.add_argument("--cpu-nodes", type=int, default=2, help="CPU-only nodes (default 2)")
    up.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    up.add_argument(
        "--product",
        help="GPU product, as GPU feature discovery names it (default: an H100 80GB HBM3; "
        "an unknown name is answered with the known ones)",
    )
    up.add_argument(
        "--os",
        default="ubuntu22.04",
        help="OS mix, comma-separated ID+VERSION_ID, round-robin over nodes "
        "(default ubuntu22.04; e.g. ubuntu22.04,rhel9.4)",
    )
    up.add_argument(
        "--kernels",
        default="",
        help="kernel mix, comma-separated, cycled over each OS's nodes "
        "(default: the usual kernel of each OS)",
    )
    up.add_argument("--mig-capable", action="store_true", help="GPUs support MIG")
    up.add_argument(
        "--container-runtime",
        help="status.nodeInfo.containerRuntimeVersion (default: a recent containerd)",
    )
    up.add_argument(
        "--mig-seconds",
        type=float,
        default=1.0,
        help="how long a simulated MIG reconfiguration stays pending (default 1)",
    )
    up.add_argument(
        "--port", type=int, default=0, help="kube-apiserver port (default: any free port)"
    )
    up.set_defaults(handler=run_up)

    down = actions.add_parser("down", help="stop the simulated cluster and remove its files")
    down.set_defaults(handler=run_down)

    status = actions.add_parser("status", help="say whether a simulated cluster is running")
    status.set_defaults(handler=run_status)

    error = actions.add_parser(
        "gpu-error",
        help="make one GPU of one simulated node sick (an XID or ECC errors), or its reset fail",
        description="The simulated NVML reports the error to the node agent, the simulated "
        "device plugin stops offering the GPU; a GPU reset clears it, unless --reset-fails.",
    )
    error.add_argument("node", help="the node's name")
    error.add_argument("--gpu", type=int, default=0, help="the GPU's index (default 0)")
    error.add_argument("--xid", type=int, help="raise this XID (79: fallen off the bus)")
    error.add_argument("--ecc", type=int, help="uncorrected ECC errors since the driver loaded")
    fails = error.add_mutually_exclusive_group()
    fails.add_argument(
        "--reset-fails",
        dest="reset_fails",
        action="store_true",
        default=None,
        help="a reset of this GPU fails from now on",
    )
    fails.add_argument(
        "--reset-works", dest="reset_fails", action="store_false", help="resets work again"
    )
    error.set_defaults(handler=run_gpu_error)

    failing = actions.add_parser(
        "failing-driver",
        help="make driver versions install but fail validation on simulated nodes",
        description="On the nodes (default: every GPU node) a driver pod of these versions "
        "turns Ready, but the validator pods never do and the node agent's GPUValidated "
        "stays False: a bad driver for trying a rollout's canary and failure budget. "
        "An empty list makes every version validate again.",
    )
    failing.add_argument(
        "versions", help="comma-separated driver versions (e.g. 600.10.01), or '' for none"
    )
    failing.add_argument(
        "--node", action="append", help="a node's name (repeatable; default every GPU node)"
    )
    failing.set_defaults(handler=run_failing_driver)
