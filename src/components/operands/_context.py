"""One render: the policy, the view and the operand's state name (`Ctx`), which stamps
every object the same way, and `BaseOperand`, which builds it only while the policy
switches the operand on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.api import (
    ClusterPolicy,
    ClusterPolicySpec,
    ImageDefault,
    ImageError,
    ImageSpec,
    OperandImage,
    operand_image,
    resolve_image,
)
from components.operands._contract import ClusterView, Rendered
from components.operands._names import COMPONENT_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE
from components.operands._runtime import detect_runtime, nri_annotations

DEFAULT_RUNTIME_CLASS = "nvidia"
DEFAULT_DRIVER_INSTALL_DIR = "/run/nvidia/driver"
#: Where the kubelet keeps its sockets; operand images expect it here inside the container,
#: whatever `hostPaths.kubeletRootDir` says it is on the host.
DEFAULT_KUBELET_ROOT_DIR = "/var/lib/kubelet"


@dataclass(frozen=True)
class Ctx:
    """The inputs of one render, with helpers that stamp every object the same way."""

    policy: ClusterPolicy
    view: ClusterView
    component: str  # the operand's state name

    @property
    def spec(self) -> ClusterPolicySpec:
        return self.policy.spec

    @property
    def namespace(self) -> str:
        return self.view.namespace

    def labels(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        out = dict(extra or {})
        out[MANAGED_BY_LABEL] = MANAGED_BY_VALUE
        out[COMPONENT_LABEL] = self.component
        return out

    def meta(
        self,
        name: str,
        *,
        namespaced: bool = True,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if namespaced:
            meta["namespace"] = self.namespace
        meta["labels"] = self.labels(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        if self.view.owner is not None:
            meta["ownerReferences"] = [dict(self.view.owner)]
        return meta

    def image(self, operand: OperandImage | ImageDefault, section: ImageSpec | None = None) -> str:
        """An image from the shared table, or from an operand's own default and the
        `section` that may override it."""
        if isinstance(operand, OperandImage):
            return operand_image(self.spec, operand, env=self.view.image_env)
        return resolve_image(section or ImageSpec(), operand, env=self.view.image_env)

    @property
    def validator_image(self) -> str:
        return self.image(OperandImage.OPERATOR_VALIDATOR)

    @property
    def runtime_class(self) -> str:
        return self.spec.operator.runtime_class or DEFAULT_RUNTIME_CLASS

    @property
    def container_runtime(self) -> str:
        """The GPU nodes' runtime (`operator.defaultRuntime` only when no node says; a
        runtime this operator does not know counts as containerd)."""
        nodes = self.view.gpu_nodes
        reported = any(n.container_runtime for n in nodes)
        default = "containerd" if reported else self.spec.operator.default_runtime
        return detect_runtime(nodes, default=default)

    @property
    def nri_plugin(self) -> bool:
        """The toolkit's NRI plugin gives management pods their GPUs (`cdi.nriPluginEnabled`,
        which needs CDI: the plugin injects CDI devices)."""
        cdi = self.spec.cdi
        return cdi.enabled and cdi.nri_plugin_enabled

    @property
    def uses_runtime_class(self) -> bool:
        """Whether management pods name the RuntimeClass: not with the NRI plugin, and not
        on CRI-O without CDI (an OCI hook there, no runtime handler)."""
        if self.nri_plugin:
            return False
        return self.spec.cdi.enabled or self.container_runtime != "crio"

    def management_annotations(self, container: str) -> dict[str, str]:
        """The pod annotations a GPU management pod needs for `container` to get its GPUs:
        the NRI plugin's, only while that plugin is on."""
        return nri_annotations(container) if self.nri_plugin else {}

    @property
    def host_root(self) -> str:
        return self.spec.host_paths.root_fs or "/"

    @property
    def driver_install_dir(self) -> str:
        return self.spec.host_paths.driver_install_dir or DEFAULT_DRIVER_INSTALL_DIR

    def kubelet_host_dir(self, subdir: str) -> str:
        """`subdir` of the kubelet's root on the host (`hostPaths.kubeletRootDir`, for
        distributions such as k0s or microk8s that move it)."""
        root = self.spec.host_paths.kubelet_root_dir or DEFAULT_KUBELET_ROOT_DIR
        return f"{root.rstrip('/')}/{subdir}"


def image_or_condition(
    ctx: Ctx,
    operand: OperandImage | ImageDefault,
    rendered: Rendered,
    reason: str = "ImageInvalid",
    *,
    section: ImageSpec | None = None,
) -> str | None:
    """The operand's image, or None after adding a condition that says why not."""
    try:
        return ctx.image(operand, section)
    except ImageError as exc:
        rendered.conditions.append((reason, f"{ctx.component}: {exc}"))
        return None


class BaseOperand(ABC):
    """An `Operand` whose `render` is empty while the policy switches it off.

    The gate lives here so that no operand can render objects for a disabled state (the
    controller would apply them, then prune them on the next pass); each operand still
    says for itself when it is enabled and what it renders.
    """

    name: str
    deploy_label: str | None
    workloads: frozenset[str] = frozenset()

    @abstractmethod
    def enabled(self, policy: ClusterPolicy) -> bool: ...

    def config_maps_read(self, policy: ClusterPolicy) -> Sequence[str]:
        """None, unless what the operand renders depends on what a ConfigMap holds."""
        return ()

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        if not self.enabled(policy):
            return Rendered()
        return self._render(Ctx(policy, view, self.name))

    @abstractmethod
    def _render(self, ctx: Ctx) -> Rendered:
        """What the operand wants while it is enabled."""
