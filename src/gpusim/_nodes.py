"""Simulated nodes: OS releases, kernels, and the Node objects a real cluster would show.

A node is described by a `NodeSpec` (its hardware and software). `node_manifest` turns it
into the Node a kubelet would register, with the labels Node Feature Discovery would add
(PCI vendor 10de on GPU nodes, OS release, kernel) and the annotations that hand the node to
kwok and tell the GPU node behaviour what hardware it has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpusim._errors import SimError
from gpusim._hardware import DEFAULT_PRODUCT, product

# kwok manages only nodes carrying this annotation (`--manage-nodes-with-annotation-selector`).
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"

# What the simulated hardware is; read by the GPU node behaviour, never by the operator.
SIM_PREFIX = "sim.gpu-operator.io/"
ANNOTATION_GPUS = SIM_PREFIX + "gpus"
ANNOTATION_PRODUCT = SIM_PREFIX + "product"
ANNOTATION_MIG_CAPABLE = SIM_PREFIX + "mig-capable"
ANNOTATION_HOST_DRIVER = SIM_PREFIX + "host-driver"
ANNOTATION_INDEX = SIM_PREFIX + "index"
ANNOTATION_XIDS = SIM_PREFIX + "xids"
"""XIDs the simulated GPUs raise, `<gpu index>:<xid>` comma-separated (a test writes it;
the node's simulated NVML delivers each once to the node agent)."""

NFD = "feature.node.kubernetes.io/"
LABEL_PCI_NVIDIA = NFD + "pci-10de.present"
LABEL_OS_ID = NFD + "system-os_release.ID"
LABEL_OS_VERSION = NFD + "system-os_release.VERSION_ID"
LABEL_KERNEL = NFD + "kernel-version.full"

DEFAULT_CONTAINER_RUNTIME = "containerd://2.1.4"
KUBELET_VERSION = "v1.37.2"


@dataclass(frozen=True)
class _OsFamily:
    pretty: str  # `{version}` and `{major}` are filled in
    kernels: dict[str, str]  # default kernel by major version ("" = any)
    dotted: bool = False  # VERSION_ID must be major.minor (Ubuntu)


_OS_FAMILIES: dict[str, _OsFamily] = {
    "ubuntu": _OsFamily(
        "Ubuntu {version} LTS",
        {"20": "5.4.0-204-generic", "22": "5.15.0-131-generic", "": "6.8.0-51-generic"},
        dotted=True,
    ),
    "rhel": _OsFamily(
        "Red Hat Enterprise Linux {version}",
        {
            "8": "4.18.0-553.el8_10.x86_64",
            "9": "5.14.0-427.13.1.el9_4.x86_64",
            "": "6.12.0-55.9.1.el10_0.x86_64",
        },
    ),
    "rocky": _OsFamily(
        "Rocky Linux {version}",
        {
            "8": "4.18.0-553.el8_10.x86_64",
            "9": "5.14.0-427.13.1.el9_4.x86_64",
            "": "6.12.0-55.9.1.el10_0.x86_64",
        },
    ),
    "ol": _OsFamily(
        "Oracle Linux Server {version}",
        {"8": "5.15.0-209.161.7.2.el8uek.x86_64", "": "5.15.0-209.161.7.2.el9uek.x86_64"},
    ),
    "sles": _OsFamily("SUSE Linux Enterprise Server {version}", {"": "6.4.0-150600.23.25-default"}),
    "debian": _OsFamily("Debian GNU/Linux {version}", {"": "6.1.0-28-amd64"}),
}

_OS_PATTERN = re.compile(r"^([a-z]+)(\d+(?:\.\d+)?)$")
# major.minor.patch, then what fits a label value (at most 63 characters, alphanumerics with
# `-`, `_`, `.` inside); `6.8` alone would also read as a YAML number in kwok's templates.
_KERNEL_PATTERN = re.compile(r"^(?=.{5,63}$)\d+\.\d+\.\d+([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_RUNTIME_PATTERN = re.compile(r"^(containerd|cri-o|docker)://[0-9][-A-Za-z0-9_.+]*$")


@dataclass(frozen=True)
class OsRelease:
    """An OS as NFD reports it: `ID` and `VERSION_ID` of /etc/os-release."""

    id: str
    version_id: str

    def __str__(self) -> str:
        return f"{self.id}{self.version_id}"

    @property
    def major(self) -> str:
        return self.version_id.split(".", 1)[0]

    @property
    def pretty_name(self) -> str:
        return _OS_FAMILIES[self.id].pretty.format(version=self.version_id, major=self.major)

    @property
    def default_kernel(self) -> str:
        kernels = _OS_FAMILIES[self.id].kernels
        return kernels.get(self.major, kernels[""])


def parse_os(text: str) -> OsRelease:
    """`ubuntu22.04` -> OsRelease("ubuntu", "22.04"); anything else is one clear sentence."""
    known = ", ".join(_OS_FAMILIES)
    match = _OS_PATTERN.match(text.strip())
    if match is None or match.group(1) not in _OS_FAMILIES:
        raise SimError(
            f"unknown OS {text!r}; write it as ID and VERSION_ID, e.g. ubuntu22.04 or rhel9.4 "
            f"(known IDs: {known})"
        )
    os_id, version = match.groups()
    if _OS_FAMILIES[os_id].dotted and "." not in version:
        raise SimError(f"unknown OS {text!r}; {os_id} versions look like {os_id}22.04")
    return OsRelease(os_id, version)


def parse_os_list(text: str | Sequence[str]) -> tuple[OsRelease, ...]:
    """A comma-separated mix (`ubuntu22.04,rhel9.4`) or a sequence of OS strings."""
    items = text.split(",") if isinstance(text, str) else list(text)
    releases = tuple(parse_os(item) for item in items if item.strip())
    if not releases:
        raise SimError("the OS list is empty; give at least one, e.g. ubuntu22.04")
    return releases


def check_kernel(kernel: str) -> str:
    if not _KERNEL_PATTERN.match(kernel):
        raise SimError(
            f"invalid kernel version {kernel!r}; it must look like 5.15.0-131-generic "
            "(a label value: at most 63 letters, digits, '-', '_' or '.')"
        )
    return kernel


def parse_kernels(text: str | Sequence[str]) -> tuple[str, ...]:
    items = text.split(",") if isinstance(text, str) else list(text)
    return tuple(check_kernel(item.strip()) for item in items if item.strip())


@dataclass(frozen=True)
class NodeSpec:
    """One simulated node: its name, GPUs (0 for a CPU-only node), OS, kernel and runtime.

    `host_driver` names a driver version preinstalled on the host (the operator's driver
    pod is then not needed for GPU resources), as on images that ship the driver.
    """

    name: str
    gpus: int = 8
    product: str = DEFAULT_PRODUCT
    os: OsRelease = field(default_factory=lambda: OsRelease("ubuntu", "22.04"))
    kernel: str = ""
    mig_capable: bool = False
    container_runtime: str = DEFAULT_CONTAINER_RUNTIME
    host_driver: str = ""

    def __post_init__(self) -> None:
        if not self.kernel:
            object.__setattr__(self, "kernel", self.os.default_kernel)

    def validate(self) -> None:
        if self.gpus < 0:
            raise SimError(f"node {self.name}: the GPU count must not be negative")
        check_kernel(self.kernel)
        if not _RUNTIME_PATTERN.match(self.container_runtime):
            raise SimError(
                f"invalid container runtime {self.container_runtime!r}; "
                "write it as containerd://2.1.4, cri-o://1.33.0 or docker://28.3.0"
            )
        if self.gpus:
            gpu = product(self.product)
            if self.mig_capable and not gpu.supports_mig:
                raise SimError(f"{gpu.name} does not support MIG; leave out MIG or pick another")


def gpu_node(name: str, **fields: Any) -> NodeSpec:
    """A GPU node spec; `os` may be given as a string (`rhel9.4`)."""
    if isinstance(fields.get("os"), str):
        fields["os"] = parse_os(fields["os"])
    spec = NodeSpec(name, **fields)
    spec.validate()
    return spec


def cpu_node(name: str, **fields: Any) -> NodeSpec:
    """A CPU-only node spec (no NVIDIA PCI device)."""
    return gpu_node(name, gpus=0, **fields)


def _kernel_parts(kernel: str) -> dict[str, str]:
    match = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", kernel)
    if match is None:
        return {}
    major, minor, revision = match.groups()
    parts = {NFD + "kernel-version.major": major, NFD + "kernel-version.minor": minor}
    if revision is not None:
        parts[NFD + "kernel-version.revision"] = revision
    return parts


def node_labels(spec: NodeSpec) -> dict[str, str]:
    """What kubelet and NFD label the node with (never the operator's or GFD's labels)."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "type": "kwok",
        LABEL_OS_ID: spec.os.id,
        LABEL_OS_VERSION: spec.os.version_id,
        LABEL_OS_VERSION + ".major": spec.os.major,
        LABEL_KERNEL: spec.kernel,
        **_kernel_parts(spec.kernel),
    }
    if "." in spec.os.version_id:
        labels[LABEL_OS_VERSION + ".minor"] = spec.os.version_id.split(".", 1)[1]
    if spec.gpus:
        labels[LABEL_PCI_NVIDIA] = "true"
    return labels


def kernel_labels(kernel: str) -> dict[str, str | None]:
    """The NFD labels that change when a node boots another kernel."""
    labels: dict[str, str | None] = {
        NFD + "kernel-version.revision": None,
        LABEL_KERNEL: check_kernel(kernel),
    }
    labels.update(_kernel_parts(kernel))
    return labels


def node_manifest(spec: NodeSpec, index: int) -> dict[str, Any]:
    """The Node object a kubelet would register for `spec` (`index` picks IPs and pod CIDR)."""
    annotations = {
        KWOK_ANNOTATION: KWOK_ANNOTATION_VALUE,
        "node.alpha.kubernetes.io/ttl": "0",
        ANNOTATION_INDEX: str(index),
    }
    if spec.gpus:
        annotations[ANNOTATION_GPUS] = str(spec.gpus)
        annotations[ANNOTATION_PRODUCT] = spec.product
        annotations[ANNOTATION_MIG_CAPABLE] = "true" if spec.mig_capable else "false"
        if spec.host_driver:
            annotations[ANNOTATION_HOST_DRIVER] = spec.host_driver
    resources = {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    high, low = divmod(index, 250)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": node_labels(spec), "annotations": annotations},
        "spec": {"podCIDR": f"10.{64 + (index // 256) % 192}.{index % 256}.0/24"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "addresses": [
                {"type": "InternalIP", "address": f"172.{16 + high % 16}.{high // 16}.{low + 1}"},
                {"type": "Hostname", "address": spec.name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": spec.os.pretty_name,
                "kernelVersion": spec.kernel,
                "containerRuntimeVersion": spec.container_runtime,
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                # Letters first: kwok's templates re-read these as YAML, where 000.. is a number.
                "machineID": f"f{index:031x}",
                "systemUUID": f"00000000-0000-4000-8000-{index:012x}",
                "bootID": f"b0000000-0000-4000-8000-{index:012x}",
            },
        },
    }


#: The counts a simulated cluster is built from: each `ClusterConfig` field, what it is
#: called in a sentence, and its least and most values.
COUNT_LIMITS: Mapping[str, tuple[str, int, int | None]] = {
    "gpu_nodes": ("the number of GPU nodes", 1, None),
    "cpu_nodes": ("the number of CPU-only nodes", 0, None),
    "gpus_per_node": ("GPUs per node", 1, 16),
}


def check_counts(counts: Mapping[str, int], names: Mapping[str, str]) -> None:
    """Each of `counts` (by `COUNT_LIMITS` field) within its limits, or one sentence that
    calls it by `names` (a flag on the command line, a phrase elsewhere)."""
    for field_name, (_, least, most) in COUNT_LIMITS.items():
        value, name = counts[field_name], names[field_name]
        if most is not None and not least <= value <= most:
            raise SimError(f"{name} must be between {least} and {most} (got {value})")
        if value < least:
            bound = "not be negative" if least == 0 else f"be at least {least}"
            raise SimError(f"{name} must {bound} (got {value})")


@dataclass(frozen=True)
class ClusterConfig:
    """The simulated cluster `sim up` builds: GPU nodes, a few CPU-only nodes, their mix."""

    gpu_nodes: int = 2
    cpu_nodes: int = 1
    gpus_per_node: int = 8
    product: str = DEFAULT_PRODUCT
    os: tuple[OsRelease, ...] = (OsRelease("ubuntu", "22.04"),)
    kernels: tuple[str, ...] = ()
    mig_capable: bool = False
    container_runtime: str = DEFAULT_CONTAINER_RUNTIME
    # How long the simulated MIG manager stays `pending` before `success`.
    mig_reconfigure_seconds: float = 1.0

    def validate(self) -> None:
        check_counts(
            {name: getattr(self, name) for name in COUNT_LIMITS},
            {name: what for name, (what, _, _) in COUNT_LIMITS.items()},
        )
        if not self.os:
            raise SimError("the OS list is empty; give at least one, e.g. ubuntu22.04")
        if self.mig_reconfigure_seconds < 0:
            raise SimError("the MIG reconfiguration time must not be negative")
        for kernel in self.kernels:
            check_kernel(kernel)
        gpu = product(self.product)
        if self.mig_capable and not gpu.supports_mig:
            raise SimError(
                f"{gpu.name} does not support MIG; drop --mig-capable or pick a MIG product"
            )
        gpu_node("check", container_runtime=self.container_runtime).validate()

    def node_specs(self) -> list[NodeSpec]:
        """GPU nodes first, then CPU-only ones; OS round-robin, kernels cycling per OS."""
        self.validate()
        specs: list[NodeSpec] = []
        for kind, count in (("gpu", self.gpu_nodes), ("cpu", self.cpu_nodes)):
            for i in range(count):
                os = self.os[i % len(self.os)]
                kernels = self.kernels or (os.default_kernel,)
                specs.append(
                    NodeSpec(
                        name=f"{kind}-node-{i:04d}",
                        gpus=self.gpus_per_node if kind == "gpu" else 0,
                        product=self.product,
                        os=os,
                        kernel=kernels[(i // len(self.os)) % len(kernels)],
                        mig_capable=self.mig_capable,
                        container_runtime=self.container_runtime,
                    )
                )
        return specs
