"""`gpu-feature-discovery`: GPU feature discovery labels each GPU node with what its GPUs
are (`nvidia.com/gpu.product`, `gpu.count`, `gpu.memory`, `cuda.driver.major`,
`mig.strategy`, ...). It writes a feature file into
`/etc/kubernetes/node-feature-discovery/features.d` (and NodeFeature objects), which
node-feature-discovery turns into node labels.

**How NFD is provided (decision).** The operator does not deploy node-feature-discovery
itself, exactly like the reference: the ClusterPolicy has no NFD section, and the
reference's Helm chart installs NFD as a subchart (`nfd.enabled: true` by default, or
`false` when the cluster already runs one, e.g. OpenShift's NFD operator). We do the same:
NFD comes with the operator's installation (our deployment manifests / chart) or is already
in the cluster; the operator only reads its labels (`pci-10de.present`, `system-os_release.*`,
`kernel-version.full`) and the ClusterPolicy controller reports `NFDLabelsMissing` when no
node carries them. GFD needs NFD's worker to publish its labels; without NFD, GFD runs but
its labels never reach the nodes.

With `devicePlugin.config.name`, GFD reads the same per-node configuration as the device
plugin (see `device_plugin`).
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx, image_or_condition
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._plugin_config import apply_plugin_config, mig_env
from components.operands._pods import (
    env,
    env_field,
    host_path,
    mount,
    run_nvidia_volume,
    toolkit_validation,
)
from components.operands._rbac import rule

PART_OF = {"app.kubernetes.io/part-of": "nvidia-gpu"}
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


class GPUFeatureDiscovery(DeclaredOperand):
    """The GFD DaemonSet, its ServiceAccount and RBAC."""

    key = "gpu-feature-discovery"
    name = "gpu-feature-discovery"
    workloads = frozenset({CONTAINER})
    app = "gpu-feature-discovery"
    image = OperandImage.GPU_FEATURE_DISCOVERY
    rules = (
        rule(["nfd.k8s-sigs.io"], ["nodefeatures"], ["get", "list", "watch", "create", "update"]),
    )
    cluster_rules = (
        rule([""], ["nodes"], ["get", "list", "watch"]),
        rule([""], ["pods"], ["get"]),
    )

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = {
            "name": "gpu-feature-discovery",
            "command": ["gpu-feature-discovery"],
            "securityContext": {"privileged": True},
            "volumeMounts": [
                mount("output-dir", FEATURES_DIR),
                mount("host-sys", "/sys", read_only=True),
            ],
        }
        volumes = [
            host_path("output-dir", FEATURES_DIR),
            host_path("host-sys", "/sys"),
            run_nvidia_volume(),
        ]

        def config_manager(pod: dict[str, Any], main: dict[str, Any]) -> None:
            if not ctx.spec.device_plugin.config.name:
                return
            # The config-manager containers come with the device plugin's image.
            plugin_image = image_or_condition(ctx, OperandImage.DEVICE_PLUGIN, rendered)
            apply_plugin_config(
                ctx, pod, main, image=plugin_image or image, process="gpu-feature-discovery"
            )

        pod = Pod(
            main,
            volumes,
            env=_gfd_env(ctx),
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            runtime_class=True,
            selector=PART_OF,
            finish=config_manager,
        )
        return [self.daemonset(ctx, image, pod)]


def _gfd_env(ctx: Ctx) -> list[dict[str, Any]]:
    envs = [
        env("GFD_SLEEP_INTERVAL", "60s"),
        env("GFD_FAIL_ON_INIT_ERROR", "true"),
        env_field("NAMESPACE", "metadata.namespace"),
        env_field("NODE_NAME", "spec.nodeName"),
        env_field("POD_NAME", "metadata.name"),
    ]
    mig_env(envs, ctx.spec.mig.strategy)
    return envs
