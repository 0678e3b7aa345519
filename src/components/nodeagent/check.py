"""`hack/nvml-check.sh`: the real NVML backend on this machine, read-only, as one JSON
object (inventory, MIG mode and devices, compute processes, health, what the agent would
report). It never changes a GPU: no MIG mode switch, no reset, no clocks, no persistence
mode; NVML is opened, read and shut down.

Exit status 0 with the JSON on stdout; 77 (the "skipped" status of automake and meson)
with one line on stderr when this machine has no NVML to read (no library, no driver, no
GPU), so CI without a GPU reports a skip that says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from components.nodeagent._host import HostRoot
from components.nodeagent._nvml import NvmlUnavailable, open_nvml
from components.nodeagent._report import Observation, driver_verdict, health_verdict

SKIPPED = 77


def check(host_root: str, xid_wait_s: float) -> dict[str, Any]:
    nvml = open_nvml()
    try:
        gpus = [nvml.read_gpu(i) for i in range(nvml.device_count())]
        xids = nvml.wait_xids(xid_wait_s)
        host = HostRoot(host_root).facts()
        obs = Observation(
            node="this machine",
            host=host,
            driver_version=nvml.driver_version(),
            cuda_version=nvml.cuda_driver_version(),
            gpus=tuple(gpus),
            xids={e.gpu_uuid: (e.xid,) for e in xids},
        )
        return {
            "driverVersion": obs.driver_version,
            "cudaDriverVersion": obs.cuda_version,
            "host": dataclasses.asdict(host),
            "gpuCount": len(gpus),
            "gpus": [dataclasses.asdict(g) for g in gpus],
            "xids": [dataclasses.asdict(e) for e in xids],
            "conditions": [
                dataclasses.asdict(v) for v in (driver_verdict(obs), health_verdict(obs))
            ],
        }
    finally:
        nvml.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nvml-check", description="Read this machine's GPUs through NVML, read-only."
    )
    parser.add_argument("--host-root", default="/", help="the host's root (default /)")
    parser.add_argument(
        "--xid-wait", type=float, default=1.0, help="seconds to listen for XID events"
    )
    args = parser.parse_args(argv)
    try:
        result = check(args.host_root, args.xid_wait)
    except NvmlUnavailable as exc:
        print(
            f"nvml-check: skipped: no NVIDIA GPU to read on this machine ({exc})", file=sys.stderr
        )
        return SKIPPED
    if not result["gpuCount"]:
        print("nvml-check: skipped: NVML answers but sees no GPU", file=sys.stderr)
        return SKIPPED
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
