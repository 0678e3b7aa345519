"""The skeleton every DaemonSet operand shares, built from what the operand declares.

An operand says only what is its own: its key (from which its state name, deploy label,
`app` and account names follow unless it names them), image, RBAC rules, Service, the
workloads (node kinds) it serves, and its pod (`Pod`: the main container's fields, env,
volumes, init containers). `DeclaredOperand` makes the rest the same way for all: the
ServiceAccount with its Role / ClusterRole, the Service and its ServiceMonitor, the
image (or the condition that says why there is none), the main container with the
section's pull policy, `env`, `args` and `resources`, the pod spec and the DaemonSet.
One builder, so that no operand can forget a piece another has (its section's pull
secrets, the NRI annotation of a management pod, the ServiceMonitor's check for its
CRD), and a new operand is a declaration rather than another copy. The driver, whose
DaemonSets are per OS and kernel, builds its own.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from components.api import (
    ClusterPolicy,
    ImageDefault,
    ImageSpec,
    OperandImage,
    OperandSpec,
    operand_section,
)
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import Rendered
from components.operands._names import deploy_label
from components.operands._pods import apply_component, build_pod_spec, merge_env, pull_policy
from components.operands._rbac import account_and_rbac
from components.operands._sandbox import sandbox_on
from components.operands._workloads import daemonset, prometheus_scrape, service, service_monitor

Rule = Mapping[str, Any]


@dataclass(frozen=True)
class MetricsService:
    """The operand's Service (named and selecting by its `app`) on one port, and, where
    prometheus-operator's CRD is installed, a ServiceMonitor scraping `/metrics` there."""

    port: int
    port_name: str
    #: The `prometheus.io/scrape` annotations, for setups that find targets by them.
    scrape: bool = True
    monitor: bool = True
    internal_traffic_policy: str = ""


@dataclass
class Pod:
    """What one operand's DaemonSet pod has of its own; `DeclaredOperand.daemonset` adds
    the rest (see the module docstring)."""

    #: The main container's own fields (name, command, ports, securityContext, mounts...).
    main: dict[str, Any]
    volumes: list[dict[str, Any]]
    #: The main container's env before the section's `env` goes on top; None: no env but
    #: the section's.
    env: list[dict[str, Any]] | None = None
    #: False where `env` already has the section's env applied and then rewritten (the
    #: runtime's host paths the user names become paths in the container).
    user_env: bool = True
    init_containers: Sequence[dict[str, Any]] = ()
    #: Images besides the section's whose pull secrets the pod needs.
    images: Sequence[ImageSpec] = ()
    node_selector: Mapping[str, str] | None = None
    #: The GPU management RuntimeClass (and, with the NRI plugin, the main container's
    #: device annotation).
    runtime_class: bool = False
    #: The container the NRI annotation gives GPUs to, when not the main one.
    gpu_container: str | None = None
    host_pid: bool = False
    host_ipc: bool = False
    #: None: the section's `hostNetwork`.
    host_network: bool | None = None
    #: Pod spec fields beyond the common ones (terminationGracePeriodSeconds, affinity).
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Pod labels the DaemonSet also selects on, besides `app`.
    selector: Mapping[str, str] | None = None
    #: The operand's own pod labels and annotations (its section's `podLabels`, ...).
    pod_labels: Mapping[str, str] | None = None
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    #: Edits the pod and its main container before the section's env is applied (the
    #: device plugin's config manager sets `CONFIG_FILE`, which the user's env may change).
    finish: Callable[[dict[str, Any], dict[str, Any]], None] | None = None


class DeclaredOperand(BaseOperand):
    """A DaemonSet operand made from its declaration (the class attributes below) and
    `workload`, the objects that are its own."""

    #: Its short name, from which the names it does not declare follow the reference's
    #: convention: state `state-<key>`, deploy label `nvidia.com/gpu.deploy.<key>`, `app`
    #: and account `nvidia-<key>`.
    key: ClassVar[str]
    deploy_label: str
    app: ClassVar[str]
    account: ClassVar[str]
    #: Its image: a key of the shared table (`components.api.DEFAULT_IMAGES`, which the
    #: chart's checks read), or its own default, whose `section` names its policy section.
    image: ClassVar[OperandImage | ImageDefault]
    rules: ClassVar[Sequence[Rule]] = ()
    cluster_rules: ClassVar[Sequence[Rule]] = ()
    #: The ClusterRole's name where it is not the account's.
    cluster_role_name: ClassVar[str | None] = None
    service: ClassVar[MetricsService | None] = None
    #: Renders only while `sandboxWorkloads.enabled` too (the VM operands).
    sandbox: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "key" not in own:
            return
        derived = {
            "name": f"state-{cls.key}",
            "deploy_label": deploy_label(cls.key),
            "app": f"nvidia-{cls.key}",
            "account": f"nvidia-{cls.key}",
        }
        for attribute, value in derived.items():
            if attribute not in own:
                setattr(cls, attribute, value)

    def section(self, policy: ClusterPolicy) -> OperandSpec:
        """The policy's section for this operand (the one that names its image)."""
        if isinstance(self.image, OperandImage):
            return operand_section(policy.spec, self.image)
        section: OperandSpec = getattr(policy.spec, self.image.section)
        return section

    def enabled(self, policy: ClusterPolicy) -> bool:
        if self.sandbox and not sandbox_on(policy):
            return False
        return bool(getattr(self.section(policy), "enabled", False))

    def _render(self, ctx: Ctx) -> Rendered:
        rendered = Rendered(objects=self.rbac(ctx))
        rendered.objects.extend(self.services(ctx, rendered))
        rendered.objects.extend(self.always(ctx))
        if not self.can_run(ctx, rendered):
            return rendered
        image = image_or_condition(ctx, self.image, rendered, section=self.section(ctx.policy))
        if image is not None:
            rendered.objects.extend(self.workload(ctx, image, rendered))
        return rendered

    def rbac(self, ctx: Ctx) -> list[dict[str, Any]]:
        """The account and its Role / ClusterRole with their bindings."""
        return account_and_rbac(
            ctx,
            self.account,
            rules=self.rules,
            cluster_rules=self.cluster_rules,
            cluster_role_name=self.cluster_role_name,
        )

    def services(self, ctx: Ctx, rendered: Rendered) -> list[dict[str, Any]]:
        """The declared Service and its ServiceMonitor."""
        declared = self.service
        if declared is None:
            return []
        annotations = prometheus_scrape(declared.port) if declared.scrape else None
        objects = [
            service(
                ctx,
                self.app,
                port=declared.port,
                port_name=declared.port_name,
                selector={"app": self.app},
                annotations=annotations,
                internal_traffic_policy=declared.internal_traffic_policy,
            )
        ]
        if declared.monitor and ctx.view.has_service_monitor_crd:
            endpoint = {"port": declared.port_name, "path": "/metrics"}
            objects.append(service_monitor(ctx, self.app, endpoint))
        return objects

    def always(self, ctx: Ctx) -> list[dict[str, Any]]:
        """Its objects that do not need the image (an entrypoint script's ConfigMap)."""
        return []

    def can_run(self, ctx: Ctx, rendered: Rendered) -> bool:
        """Whether the policy says enough to run it; if not, a condition says what is
        missing (checked before the image)."""
        return True

    @abstractmethod
    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        """The objects after the skeleton (ConfigMaps, the DaemonSet), given the image;
        problems go to `rendered.conditions`."""

    def daemonset(self, ctx: Ctx, image: str, pod: Pod) -> dict[str, Any]:
        """The DaemonSet `app` running `pod`, its main container on `image`."""
        section = self.section(ctx.policy)
        main = {"image": image, "imagePullPolicy": pull_policy(section), **pod.main}
        if pod.env is not None:
            main["env"] = pod.env
        apply_component(main, section)
        spec = build_pod_spec(
            ctx,
            account=self.account,
            deploy=self.deploy_label or "",
            init_containers=pod.init_containers,
            containers=[main],
            volumes=pod.volumes,
            images=[section, *pod.images],
            node_selector=pod.node_selector,
            runtime_class=pod.runtime_class,
            host_pid=pod.host_pid,
            host_ipc=pod.host_ipc,
            host_network=section.host_network if pod.host_network is None else pod.host_network,
        )
        spec.update(pod.extra)
        if pod.finish is not None:
            pod.finish(spec, main)
        if pod.user_env and (pod.env is not None or section.env):
            main["env"] = merge_env(main.get("env", []), section.env)
        annotations = dict(pod.pod_annotations)
        if pod.runtime_class:
            annotations.update(ctx.management_annotations(pod.gpu_container or main["name"]))
        return daemonset(
            ctx,
            self.app,
            spec,
            selector=pod.selector,
            pod_labels=pod.pod_labels,
            pod_annotations=annotations,
        )
