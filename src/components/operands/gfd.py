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

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import CONTAINER, Rendered
from components.operands._names import deploy_label
from components.operands._plugin_config import apply_plugin_config, mig_env
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
    run_nvidia_volume,
    toolkit_validation,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import daemonset

NAME = "gpu-feature-discovery"
DEPLOY_LABEL = deploy_label("gpu-feature-discovery")
APP = "gpu-feature-discovery"
ACCOUNT = "nvidia-gpu-feature-discovery"
PART_OF = {"app.kubernetes.io/part-of": "nvidia-gpu"}
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


class GPUFeatureDiscovery(BaseOperand):
    """The GFD DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({CONTAINER})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.gfd.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec
        gfd = spec.gfd
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                rules=[
                    rule(
                        ["nfd.k8s-sigs.io"],
                        ["nodefeatures"],
                        ["get", "list", "watch", "create", "update"],
                    )
                ],
                cluster_rules=[
                    rule([""], ["nodes"], ["get", "list", "watch"]),
                    rule([""], ["pods"], ["get"]),
                ],
            )
        )
        image = image_or_condition(ctx, OperandImage.GPU_FEATURE_DISCOVERY, rendered)
        if image is None:
            return rendered
        envs = [
            env("GFD_SLEEP_INTERVAL", "60s"),
            env("GFD_FAIL_ON_INIT_ERROR", "true"),
            env_field("NAMESPACE", "metadata.namespace"),
            env_field("NODE_NAME", "spec.nodeName"),
            env_field("POD_NAME", "metadata.name"),
        ]
        mig_env(envs, spec.mig.strategy)
        main = apply_component(
            {
                "name": "gpu-feature-discovery",
                "image": image,
                "imagePullPolicy": pull_policy(gfd),
                "command": ["gpu-feature-discovery"],
                "env": envs,
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    mount("output-dir", FEATURES_DIR),
                    mount("host-sys", "/sys", read_only=True),
                ],
            },
            gfd,
        )
        pod = build_pod_spec(
            ctx,
            host_network=ctx.spec.gfd.host_network,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            containers=[main],
            volumes=[
                host_path("output-dir", FEATURES_DIR),
                host_path("host-sys", "/sys"),
                run_nvidia_volume(),
            ],
            images=[gfd],
            runtime_class=True,
        )
        if spec.device_plugin.config.name:
            # The config-manager containers come with the device plugin's image.
            plugin_image = image_or_condition(ctx, OperandImage.DEVICE_PLUGIN, rendered)
            apply_plugin_config(
                ctx, pod, main, image=plugin_image or image, process="gpu-feature-discovery"
            )
        main["env"] = merge_env(main["env"], gfd.env)
        annotations = ctx.management_annotations("gpu-feature-discovery")
        rendered.objects.append(
            daemonset(ctx, APP, pod, selector=PART_OF, pod_annotations=annotations)
        )
        return rendered
