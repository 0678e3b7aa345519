"""Every operand rendered for a matrix of policies x cluster shapes, as canonical JSON.

A refactor of the operands must not change one byte of what they render. Write the
snapshot before it, check it after::

    python -m tests.unit.components.operands.render_snapshot write /tmp/before.json
    ...  # change the operands
    python -m tests.unit.components.operands.render_snapshot check /tmp/before.json

`check` exits 1 and names each case and object that differs. The matrix: the reference's
sample ClusterPolicy, the reference chart's rendered default, an empty spec, and every
optional operand switched on (MIG manager, MPS, node agent, node status exporter, the
sandbox stack on `vm-passthrough` and `vm-vgpu` nodes with vGPU, Kata and CC managers, CDI,
CRI-O and NRI runtime modes, driver RDMA / GDS / GDRCopy, precompiled drivers, several
OSes, ServiceMonitors), plus the NVIDIADriver sample through the driver operand.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from components.api import NVIDIADriver
from components.controllers._driver_crd import driver_section, policy_with_driver
from components.operands import OPERANDS, ClusterView, GPUNode, Operand

from .cases import RHEL_KERNEL, gpu_node, policy, view

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
DEPLOY = "nvidia.com/gpu.deploy."
DEVICE_PLUGIN_CONFIGS = "device-plugin-configs"
MPS_CONFIG = (
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
)
TIME_SLICING = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 2\n"
)


def _yaml_spec(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    spec: dict[str, Any] = doc["spec"]
    return spec


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _nodes_mixed(runtime: str = "containerd://2.1.4") -> list[GPUNode]:
    mps = {"nvidia.com/device-plugin.config": "mps-4"}
    return [
        gpu_node("gpu-ubuntu-1", runtime=runtime, labels=mps),
        gpu_node("gpu-ubuntu-2", runtime=runtime),
        gpu_node("gpu-ubuntu-3", kernel="6.8.0-60-generic", runtime=runtime, mig_capable=True),
        gpu_node("gpu-rhel-1", "rhel", "9.4", RHEL_KERNEL, runtime=runtime, labels=mps),
        gpu_node("gpu-rocky-1", "rocky", "9.4", RHEL_KERNEL, runtime=runtime, mig_capable=True),
    ]


def _nodes_single() -> list[GPUNode]:
    return [gpu_node("gpu-1"), gpu_node("gpu-2", mig_capable=True)]


def _nodes_vm() -> list[GPUNode]:
    passthrough = {
        DEPLOY + k: "true" for k in ("vfio-manager", "sandbox-device-plugin", "sandbox-validator")
    }
    vgpu = {DEPLOY + k: "true" for k in ("vgpu-manager", "vgpu-device-manager")}
    return [
        gpu_node("ctr-1", mig_capable=True),
        gpu_node(
            "vm-1", labels={"nvidia.com/gpu.workload.config": "vm-passthrough", **passthrough}
        ),
        gpu_node("vm-2", labels={"nvidia.com/gpu.workload.config": "vm-vgpu", **vgpu}),
        gpu_node(
            "vm-3",
            "rhel",
            "9.4",
            RHEL_KERNEL,
            labels={"nvidia.com/gpu.workload.config": "vm-vgpu", **vgpu},
        ),
    ]


ALL_OPTIONAL: Mapping[str, Any] = {
    "migManager": {"enabled": True},
    "nodeAgent": {"enabled": True},
    "nodeStatusExporter": {"enabled": True},
    "devicePlugin": {"config": {"name": DEVICE_PLUGIN_CONFIGS, "default": "ts-2"}},
    "dcgm": {"enabled": True},
    "driver": {"rdma": {"enabled": True, "useHostMofed": True}},
    "gds": {"enabled": True},
    "gdrcopy": {"enabled": True},
}
SANDBOX: Mapping[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "defaultWorkload": "container"},
    "vgpuManager": {"enabled": True, "repository": "registry.example/nvidia", "version": "595.58"},
    "vgpuDeviceManager": {"config": {"name": "vgpu-devices", "default": "A100-4C"}},
    "kataManager": {"enabled": True},
    "ccManager": {"enabled": True, "defaultMode": "on"},
}
_SECTIONS = (
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "nodeAgent",
    "validator",
    "vfioManager",
    "sandboxDevicePlugin",
    "vgpuManager",
    "vgpuDeviceManager",
    "kataManager",
    "ccManager",
)
_USER_ENV = [
    {"name": "CONTAINERD_CONFIG", "value": "/etc/k3s/containerd/config.toml"},
    {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
    {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/etc/k3s/config.toml"},
    {"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": "localhost:5555"},
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
    {"name": "EXTRA", "value": "1"},
]
#: Every section's shared fields set, and the policy-wide pod settings.
OVERRIDES: Mapping[str, Any] = {
    **{
        section: {
            "env": _USER_ENV,
            "args": ["--extra"],
            "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "64Mi"}},
            "imagePullSecrets": ["pull-secret"],
            "imagePullPolicy": "Always",
            "hostNetwork": True,
        }
        for section in _SECTIONS
    },
    "dcgm": {"enabled": False},
    "daemonsets": {
        "labels": {"team": "gpu"},
        "annotations": {"note": "x"},
        "priorityClassName": "high",
        "updateStrategy": "OnDelete",
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    },
    "hostPaths": {"rootFS": "/host-root", "driverInstallDir": "/opt/nvidia/driver"},
    "operator": {"runtimeClass": "nvidia-custom"},
}
CONFIG_DATA = {DEVICE_PLUGIN_CONFIGS: {"mps-4": MPS_CONFIG, "ts-2": TIME_SLICING}}


def cases() -> Iterator[tuple[str, dict[str, Any], ClusterView]]:
    """(case name, ClusterPolicy spec, cluster) for every shape the snapshot covers."""
    sample = _yaml_spec(FIXTURES / "compat" / "nvidia-clusterpolicy-sample.yaml")
    chart = _yaml_spec(FIXTURES / "helm-rendered-clusterpolicy.yaml")
    mixed = view(_nodes_mixed(), config_map_data=CONFIG_DATA)
    mixed_sm = view(_nodes_mixed(), config_map_data=CONFIG_DATA, service_monitors=True)
    policies: dict[str, dict[str, Any]] = {
        "empty": {},
        "reference-sample": sample,
        "chart-default": chart,
        "all-optional": dict(ALL_OPTIONAL),
        "sample-all-optional": _merge(sample, ALL_OPTIONAL),
        "chart-all-optional": _merge(chart, ALL_OPTIONAL),
        "precompiled": _merge(ALL_OPTIONAL, {"driver": {"usePrecompiled": True, "version": "595"}}),
        "cdi": _merge(ALL_OPTIONAL, {"cdi": {"enabled": True}}),
        "cdi-default": _merge(ALL_OPTIONAL, {"cdi": {"enabled": True, "default": True}}),
        "nri": _merge(ALL_OPTIONAL, {"cdi": {"enabled": True, "nriPluginEnabled": True}}),
        "sandbox": _merge(ALL_OPTIONAL, SANDBOX),
        "sandbox-kata": _merge(
            ALL_OPTIONAL,
            _merge(
                SANDBOX, {"sandboxWorkloads": {"mode": "kata", "defaultWorkload": "vm-passthrough"}}
            ),
        ),
        "chart-sandbox": _merge(chart, SANDBOX),
        "driver-off": _merge(ALL_OPTIONAL, {"driver": {"enabled": False}}),
        "overrides": _merge(_merge(ALL_OPTIONAL, SANDBOX), OVERRIDES),
        "overrides-kata-cdi": _merge(
            _merge(_merge(ALL_OPTIONAL, SANDBOX), OVERRIDES),
            {"sandboxWorkloads": {"mode": "kata"}, "cdi": {"enabled": True}},
        ),
    }
    for name, spec in policies.items():
        yield f"{name}/mixed", spec, mixed
        yield f"{name}/mixed-servicemonitor", spec, mixed_sm
        yield f"{name}/single-os", spec, view(_nodes_single())
        yield (
            f"{name}/crio",
            spec,
            view(_nodes_mixed("cri-o://1.31.0"), config_map_data=CONFIG_DATA),
        )
        yield f"{name}/vm", spec, view(_nodes_vm(), config_map_data=CONFIG_DATA)
        yield f"{name}/vm-one-os", spec, view(_nodes_vm()[:3], config_map_data=CONFIG_DATA)
        yield f"{name}/no-nodes", spec, view([])


def _nvidiadriver_cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    doc = yaml.safe_load((FIXTURES / "compat" / "nvidia-nvidiadriver-sample.yaml").read_text())
    doc.setdefault("metadata", {})["uid"] = "00000000-0000-4000-8000-00000000000d"
    nvidia_driver = NVIDIADriver.from_dict(doc)
    section = driver_section(nvidia_driver.spec)
    driver = next(op for op in OPERANDS if op.name == "state-driver")
    for cluster, shape in (("mixed", _nodes_mixed()), ("single-os", _nodes_single())):
        for base_name, base in (("empty", {}), ("all-optional", dict(ALL_OPTIONAL))):
            the_policy = policy_with_driver(policy(base), section)

            def render(p: Any = the_policy, nodes: Sequence[GPUNode] = shape) -> Any:
                return driver.render(p, view(nodes))

            yield f"nvidiadriver-sample/{base_name}/{cluster}", render


def _rendered(operand: Operand, spec: Mapping[str, Any], cluster: ClusterView) -> Any:
    the_policy = policy(spec)
    out = operand.render(the_policy, cluster)
    return {
        "enabled": operand.enabled(the_policy),
        "deploy_label": operand.deploy_label,
        "config_maps_read": list(operand.config_maps_read(the_policy)),
        "objects": out.objects,
        "conditions": [list(c) for c in out.conditions],
    }


def snapshot(operands: Sequence[Operand] = OPERANDS) -> dict[str, Any]:
    """case -> operand state name -> what it renders (and its switch, label, reads)."""
    result: dict[str, Any] = {}
    for case, spec, cluster in cases():
        result[case] = {op.name: _rendered(op, spec, cluster) for op in operands}
    for case, render in _nvidiadriver_cases():
        out = render()
        result[case] = {
            "state-driver": {
                "objects": out.objects,
                "conditions": [list(c) for c in out.conditions],
            }
        }
    return result


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each case / operand / object that differs, in words (empty when identical)."""
    out: list[str] = []
    for case in sorted(set(before) | set(after)):
        old, new = before.get(case), after.get(case)
        if old is None or new is None:
            out.append(f"{case}: {'added' if old is None else 'removed'}")
            continue
        for name in sorted(set(old) | set(new)):
            if canonical(old.get(name)) == canonical(new.get(name)):
                continue
            a, b = old.get(name) or {}, new.get(name) or {}
            keys = sorted(k for k in set(a) | set(b) if canonical(a.get(k)) != canonical(b.get(k)))
            out.append(f"{case} {name}: {', '.join(keys)} differ")
    return out


def check(path: Path, now: Mapping[str, Any]) -> list[str]:
    """What differs between the snapshot in `path` and `now` (empty: byte-identical)."""
    if path.read_text() == canonical(now):
        return []
    return differences(json.loads(path.read_text()), now) or ["formatting differs"]


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "check"):
        print("usage: render_snapshot write|check FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    now = snapshot()
    if argv[0] == "write":
        path.write_text(canonical(now))
        print(f"{path}: {len(now)} cases, {path.stat().st_size} bytes")
        return 0
    changed = check(path, now)
    for line in changed:
        print(line)
    if not changed:
        print(f"identical: {len(now)} cases, {path.stat().st_size} bytes")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
