"""`state-mps-control-daemon`: the CUDA MPS control daemon, for nodes whose device plugin
shares each GPU through MPS.

The device plugin's configs live in the ConfigMap `devicePlugin.config.name` names, one per
key; a node uses the one its `nvidia.com/device-plugin.config` label names, else
`devicePlugin.config.default` (else the only one there is). A config with `sharing.mps`
makes the plugin hand out MPS clients, and the plugin waits for an MPS control daemon on
the node to serve them. So the daemon runs exactly where such a config is in use: its pods
select the device plugin's nodes (`nvidia.com/gpu.deploy.device-plugin=true`, as the
reference) and, by node affinity, the config label values that ask for MPS. The reference
selects on GPU feature discovery's `nvidia.com/mps.capable` instead; the config label is the
same fact without waiting for GFD.

A node that uses an MPS config where the daemon cannot run (the node sets
`nvidia.com/gpu.deploy.mps-control-daemon=false`) and a config that cannot be read are
reported as conditions: the policy says what is wrong, nothing is deployed half-way. A
config that cannot be read (not YAML, nested past 100 levels, over 64 KiB: `read_config`)
counts as not asking for MPS: the daemon serves the nodes of the configs that do, none runs
for the nodes that use the unreadable one, and the rest of the policy is applied as usual.
The ConfigMap is the user's, so the controller reads it once per version, with bounds and
off the event loop (`ClusterView.config_documents`); a renderer never parses it.
Like the device plugin, the daemon's own config-manager follows the node's label, so a
label change reconfigures it in place.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from components.api import ClusterPolicy, OperandImage
from components.operands._context import Ctx, image_or_condition
from components.operands._contract import ConfigDocument, GPUNode, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._names import deploy_label, nodes_phrase, wants_operand
from components.operands._plugin_config import (
    CONFIG_LABEL,
    DEFAULT_MPS_ROOT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    apply_plugin_config,
    mig_env,
)
from components.operands._pods import (
    env,
    env_field,
    host_path,
    mount,
    pull_policy,
    run_nvidia_volume,
    toolkit_validation,
)
from components.operands._rbac import rule

APP = "nvidia-device-plugin-mps-control-daemon"
#: Set to `false` on a node to keep the daemon off it (ours; the reference has none).
OPT_OUT_LABEL = deploy_label("mps-control-daemon")
DAEMON_PROCESS = "/usr/bin/mps-control-daemon"
MPS_WITHOUT_DAEMON = "MPSControlDaemonMissing"
CONFIG_UNREADABLE = "DevicePluginConfigUnreadable"


def asks_for_mps(config: Any) -> bool:
    """Whether one device-plugin config (as read) shares GPUs through MPS (`sharing.mps`)."""
    if not isinstance(config, Mapping):
        return False
    sharing = config.get("sharing")
    return isinstance(sharing, Mapping) and bool(sharing.get("mps"))


def mps_configs(configs: Mapping[str, ConfigDocument]) -> tuple[set[str], dict[str, str]]:
    """The config names that ask for MPS, and those that cannot be read (name -> why)."""
    mps: set[str] = set()
    unreadable: dict[str, str] = {}
    for name, document in sorted(configs.items()):
        if document.problem is not None:
            unreadable[name] = document.problem
        elif asks_for_mps(document.content):
            mps.add(name)
    return mps, unreadable


def node_config(node: GPUNode, default: str, configs: Mapping[str, object]) -> str | None:
    """The device-plugin config a node uses: its label, else the default, else the only one."""
    chosen = node.labels.get(CONFIG_LABEL) or default
    if not chosen and len(configs) == 1:
        chosen = next(iter(configs))
    return chosen if chosen in configs else None


def _affinity(mps: set[str], default: str, configs: Mapping[str, object]) -> dict[str, Any]:
    """Nodes whose config label names an MPS config, or that have none and the default is."""
    keep_in = {"key": OPT_OUT_LABEL, "operator": "NotIn", "values": ["false"]}
    terms = [
        {
            "matchExpressions": [
                {"key": CONFIG_LABEL, "operator": "In", "values": sorted(mps)},
                keep_in,
            ]
        }
    ]
    unlabelled = default or (next(iter(configs)) if len(configs) == 1 else "")
    if unlabelled in mps:
        terms.append(
            {"matchExpressions": [{"key": CONFIG_LABEL, "operator": "DoesNotExist"}, keep_in]}
        )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


class MPSControlDaemon(DeclaredOperand):
    """The MPS control daemon DaemonSet and its ServiceAccount and RBAC, only while a
    device-plugin node uses a config that asks for MPS."""

    key = "mps-control-daemon"
    deploy_label = DEVICE_PLUGIN_DEPLOY_LABEL
    app = APP
    account = APP
    image = OperandImage.DEVICE_PLUGIN
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch"]),)

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.device_plugin.enabled and bool(policy.spec.device_plugin.config.name)

    def config_maps_read(self, policy: ClusterPolicy) -> Sequence[str]:
        return (policy.spec.device_plugin.config.name,) if self.enabled(policy) else ()

    def _render(self, ctx: Ctx) -> Rendered:
        """Nothing, not even its account, unless a node runs it."""
        rendered = Rendered()
        configs = ctx.view.config_documents.get(ctx.spec.device_plugin.config.name) or {}
        mps = self._mps_in_use(ctx, configs, rendered)
        if not mps:
            return rendered
        image = image_or_condition(ctx, OperandImage.DEVICE_PLUGIN, rendered)
        if image is None:
            return rendered
        rendered.objects.extend(self.rbac(ctx))
        rendered.objects.extend(self.workload(ctx, image, rendered))
        return rendered

    def _mps_in_use(
        self, ctx: Ctx, configs: Mapping[str, ConfigDocument], rendered: Rendered
    ) -> set[str]:
        """The MPS configs, when some node that may run the daemon uses one (else empty);
        the configs that cannot be read and the nodes kept off it, as conditions."""
        plugin = ctx.spec.device_plugin
        mps, unreadable = mps_configs(configs)
        where = f"ConfigMap {ctx.view.namespace}/{plugin.config.name}"
        for name, problem in unreadable.items():
            rendered.conditions.append(
                (
                    CONFIG_UNREADABLE,
                    f"device-plugin config {name} in {where} cannot be read: {problem}; no "
                    "MPS control daemon runs for the nodes that use it until it is fixed",
                )
            )
        users = [
            n
            for n in ctx.view.gpu_nodes
            if wants_operand(n, DEVICE_PLUGIN_DEPLOY_LABEL)
            and node_config(n, plugin.config.default, configs) in mps
        ]
        left_out = [n.name for n in users if n.labels.get(OPT_OUT_LABEL) == "false"]
        if left_out:
            rendered.conditions.append(
                (
                    MPS_WITHOUT_DAEMON,
                    f"{nodes_phrase(left_out, ('uses', 'use'))} a device-plugin config with "
                    f"MPS sharing but {OPT_OUT_LABEL}=false keeps the MPS control daemon "
                    "off; the device plugin there cannot serve MPS clients",
                )
            )
        return mps if len(users) > len(left_out) else set()

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        plugin = ctx.spec.device_plugin
        configs = ctx.view.config_documents.get(plugin.config.name) or {}
        mps, _ = mps_configs(configs)
        mps_root = plugin.mps.root or DEFAULT_MPS_ROOT
        envs: list[dict[str, Any]] = [
            env_field("NODE_NAME", "spec.nodeName"),
            env("NVIDIA_VISIBLE_DEVICES", "all"),
            env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
        ]
        mig_env(envs, ctx.spec.mig.strategy)  # the daemon serves MIG devices as the plugin does
        main = {
            "name": "mps-control-daemon-ctr",
            "command": ["mps-control-daemon"],
            "securityContext": {"privileged": True},
            "volumeMounts": [mount("mps-shm", "/dev/shm"), mount("mps-root", "/mps")],
        }
        volumes = [
            run_nvidia_volume(),
            host_path("mps-root", mps_root, "DirectoryOrCreate"),
            host_path("mps-shm", posixpath.join(mps_root, "shm")),
        ]

        def config_manager(pod: dict[str, Any], main: dict[str, Any]) -> None:
            apply_plugin_config(ctx, pod, main, image=image, process=DAEMON_PROCESS)

        pod = Pod(
            main,
            volumes,
            env=envs,
            init_containers=[
                toolkit_validation(ctx, whole_run_nvidia=True),
                _mount_shm(ctx, image),
            ],
            runtime_class=True,
            host_pid=True,
            host_network=False,
            extra={"affinity": _affinity(mps, plugin.config.default, configs)},
            finish=config_manager,
        )
        return [self.daemonset(ctx, image, pod)]


def _mount_shm(ctx: Ctx, image: str) -> dict[str, Any]:
    """The init container that mounts the MPS shared memory under the MPS root."""
    return {
        "name": "mps-control-daemon-mounts",
        "image": image,
        "imagePullPolicy": pull_policy(ctx.spec.device_plugin),
        "command": ["mps-control-daemon", "mount-shm"],
        "securityContext": {"privileged": True},
        "volumeMounts": [mount("mps-root", "/mps", propagation="Bidirectional")],
    }
