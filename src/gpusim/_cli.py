"""`gpu-operator sim up|down|status|gpu-error|failing-driver`: a simulated GPU cluster that
keeps running in the background until `sim down`.

Progress goes to stderr; the only line on stdout, and the last one printed, is the
kubeconfig path, so `export KUBECONFIG=$(gpu-operator sim up)` works.

The flags and their help are in `components.commands.sim`, which runs these handlers by
name: the product never imports the simulator.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from components.errors import CommandError
from gpusim._cluster import SimulatedCluster
from gpusim._errors import SimError
from gpusim._hardware import DEFAULT_PRODUCT
from gpusim._nodes import (
    DEFAULT_CONTAINER_RUNTIME,
    ClusterConfig,
    check_counts,
    parse_kernels,
    parse_os_list,
)
from gpusim._state import (
    CLUSTER_DIR,
    RecordedProcess,
    SimState,
    read_state,
    remove_state,
    state_dir,
    stop_processes,
    up_lock,
    write_state,
)
from reconciler.envtest import ControlPlaneError


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def config_from_args(args: argparse.Namespace) -> ClusterConfig:
    """The cluster the flags ask for; bad flags are one sentence naming the flag."""
    check_counts(
        {"gpu_nodes": args.nodes, "cpu_nodes": args.cpu_nodes, "gpus_per_node": args.gpus_per_node},
        {"gpu_nodes": "--nodes", "cpu_nodes": "--cpu-nodes", "gpus_per_node": "--gpus-per-node"},
    )
    config = ClusterConfig(
        gpu_nodes=args.nodes,
        cpu_nodes=args.cpu_nodes,
        gpus_per_node=args.gpus_per_node,
        product=args.product or DEFAULT_PRODUCT,
        os=parse_os_list(args.os),
        kernels=parse_kernels(args.kernels),
        mig_capable=args.mig_capable,
        container_runtime=args.container_runtime or DEFAULT_CONTAINER_RUNTIME,
        mig_reconfigure_seconds=args.mig_seconds,
    )
    config.validate()
    return config


def _summary(config: ClusterConfig) -> str:
    oses = ",".join(str(o) for o in config.os)
    mig = ", MIG-capable" if config.mig_capable else ""
    return (
        f"{config.gpu_nodes} GPU nodes ({config.gpus_per_node} x {config.product}{mig}) "
        f"and {config.cpu_nodes} CPU-only nodes on {oses}"
    )


def run_up(args: argparse.Namespace) -> int:
    # Ctrl-C stops it even when started with SIGINT ignored (what a shell gives a
    # background job, and so everything a CI job launches from one).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    folder = state_dir()
    try:
        config = config_from_args(args)
        with up_lock(folder):
            existing = read_state(folder)
            if existing is not None and existing.running():
                raise SimError(
                    f"a simulated cluster is already running (kubeconfig {existing.kubeconfig}); "
                    "stop it with `gpu-operator sim down` first"
                )
            if existing is not None or (folder / CLUSTER_DIR).exists():
                _say("removing the files of a simulated cluster that is no longer running")
                remove_state(folder)
                folder.mkdir(parents=True, exist_ok=True)
            workdir = folder / CLUSTER_DIR
            state = SimState(kubeconfig=str(workdir / "kubeconfig"), summary=_summary(config))
            write_state(folder, state)  # early: `sim down` can clean up an interrupted `up`

            def record(name: str, pid: int) -> None:
                state.processes.append(RecordedProcess.of(name, pid))
                write_state(folder, state)

            cluster = SimulatedCluster(
                config,
                workdir=workdir,
                die_with_parent=False,
                apiserver_port=args.port,
                progress=_say,
                on_process=record,
            )
            try:
                cluster.start()
            except BaseException:
                remove_state(folder)
                raise
            state.status = "running"
            write_state(folder, state)
    except (SimError, ControlPlaneError) as exc:
        raise CommandError(str(exc)) from exc
    _say(
        f"simulated cluster up in {cluster.started_seconds:.1f}s: {_summary(config)}; "
        "stop it with `gpu-operator sim down`"
    )
    print(cluster.kubeconfig, flush=True)
    return 0


def run_down(args: argparse.Namespace) -> int:
    folder = state_dir()
    state = read_state(folder)
    if state is None:
        if (folder / CLUSTER_DIR).exists():
            remove_state(folder)
            _say(f"removed the leftover files of a simulated cluster in {folder}")
        else:
            _say("no simulated cluster is running")
        return 0
    stop_processes(list(reversed(state.processes)))
    remove_state(folder)
    _say(f"stopped the simulated cluster and removed its files from {folder}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    folder = state_dir()
    state = read_state(folder)
    if state is None or not state.running():
        _say("no simulated cluster is running")
        return 1
    dead = [p.name for p in state.processes if not p.alive()]
    health = f"; not running: {', '.join(dead)}" if dead else ""
    _say(f"simulated cluster {state.status}: {state.summary}{health}")
    print(Path(state.kubeconfig), flush=True)
    return 0


def run_gpu_error(args: argparse.Namespace) -> int:
    """Make one GPU of one node of the running simulated cluster sick (`_sickness`)."""
    import asyncio

    from components.run import api_client, plain_client
    from gpusim._sickness import inject_gpu_error

    state = read_state(state_dir())
    if state is None or not state.running():
        raise CommandError("no simulated cluster is running: start one with `gpu-operator sim up`")
    if args.xid is None and args.ecc is None and args.reset_fails is None:
        raise CommandError("say what breaks: --xid, --ecc or --reset-fails/--reset-works")

    async def inject() -> None:
        async with await api_client(state.kubeconfig) as api:
            client = plain_client(api, "gpu-operator-sim")
            await inject_gpu_error(
                client,
                args.node,
                args.gpu,
                xid=args.xid,
                ecc=args.ecc,
                reset_fails=args.reset_fails,
            )

    asyncio.run(inject())
    what = [f"XID {args.xid}"] if args.xid is not None else []
    what += [f"{args.ecc} uncorrected ECC errors"] if args.ecc is not None else []
    if args.reset_fails is not None:
        what.append("its resets fail" if args.reset_fails else "its resets work")
    _say(f"node {args.node}, GPU {args.gpu}: {', '.join(what)}")
    return 0


def run_failing_driver(args: argparse.Namespace) -> int:
    """Make driver versions fail validation on nodes of the running simulated cluster
    (`_failing_drivers`): the way to try a rollout of a bad driver."""
    import asyncio

    from components.run import api_client, plain_client
    from gpusim._failing_drivers import mark_failing_drivers
    from gpusim._nodes import ANNOTATION_GPUS
    from reconciler import annotations_of, name_of

    state = read_state(state_dir())
    if state is None or not state.running():
        raise CommandError("no simulated cluster is running: start one with `gpu-operator sim up`")
    versions = [v.strip() for v in (args.versions or "").split(",") if v.strip()]

    async def mark() -> list[str]:
        async with await api_client(state.kubeconfig) as api:
            client = plain_client(api, "gpu-operator-sim")
            nodes = list(args.node or [])
            if not nodes:
                listed: Any = await client.request("GET", "/api/v1/nodes")
                nodes = [
                    name_of(n)
                    for n in listed.get("items") or []
                    if annotations_of(n).get(ANNOTATION_GPUS)
                ]
            for node in nodes:
                await mark_failing_drivers(client, node, versions)
            return nodes

    marked = asyncio.run(mark())
    what = (
        f"driver {', '.join(versions)} fails validation" if versions else "every driver validates"
    )
    _say(f"{what} on {len(marked)} node(s): {', '.join(marked) or '-'}")
    return 0
