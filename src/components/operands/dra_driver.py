"""`state-dra-driver`: NVIDIA's DRA driver, the GPUCluster's replacement of the device
plugin (the reference's `state-dra-driver` manifests, facts only).

Renders, named as the reference names them:

* the kubelet plugin's ServiceAccount `nvidia-dra-driver-kubeletplugin`, its ClusterRole
  (publish its node's ResourceSlices, read claims and nodes) and its Role to list
  DaemonSets (the driver-validation init container asks whether the operator runs the
  driver); with `featureGates.MPSSupport` a Role for the MPS Deployments it makes;
* the DeviceClasses `gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com` (CEL on the
  device's driver and `type` attribute);
* the ValidatingAdmissionPolicy `resourceslices-policy-nvidia-dra-driver` and its binding:
  the plugin's account may write only the ResourceSlices of the node its pod runs on (the
  node-name claim of its projected token);
* the kubelet-plugin DaemonSet `nvidia-dra-driver-kubelet-plugin` (pods `app:
  nvidia-dra-driver-kubelet-plugin`) on nodes labelled `nvidia.com/gpu.deploy.dra-driver`:
  a driver-validation init container (the validator image: waits for a driver, the
  NVIDIADriver's or the host's), then the `gpus` container and, with compute domains, the
  `compute-domains` one;
* with compute domains (`computeDomains.enabled`, the default): the compute-domain
  controller Deployment `nvidia-dra-driver-controller` with its account and RBAC, the
  compute-domain daemon's account and ClusterRole, the plugin's Role on compute-domain
  cliques, and the DeviceClasses `compute-domain-daemon.nvidia.com` and
  `compute-domain-default-channel.nvidia.com`.

Renders only for a GPUCluster (`components.api.dra_stack`); a ClusterPolicy never has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.api import (
    ClusterPolicy,
    DRAHealthcheckSpec,
    DRAKubeletPluginSpec,
    ImageDefault,
    ImageSpec,
    ResourceRequirements,
)
from components.operands._context import DEFAULT_DRIVER_INSTALL_DIR, BaseOperand, Ctx
from components.operands._contract import Rendered
from components.operands._dra import (
    GPU_NODE_TERMS,
    RESOURCE_API,
    account,
    dra_section,
    node_affinity,
    on_dra_stack,
    pod_basics,
    role_for,
    workload,
)
from components.operands._names import deploy_label
from components.operands._pods import (
    AS_ROOT,
    PRIVILEGED,
    env,
    env_field,
    host_path,
    mount,
    resources,
)
from components.operands._rbac import rule

#: The reference chart's default image (its `draDriver` values); `DRA_DRIVER_IMAGE` in the
#: operator's environment replaces it, as the other operands' variables do.
IMAGE = ImageDefault("nvcr.io/nvidia", "dra-driver-nvidia-gpu", "v0.5.0", "DRA_DRIVER_IMAGE")

NAME = "nvidia-dra-driver"
PLUGIN = "nvidia-dra-driver-kubelet-plugin"
PLUGIN_ACCOUNT = "nvidia-dra-driver-kubeletplugin"
CONTROLLER = "nvidia-dra-driver-controller"
CD_DAEMON = "compute-domain-daemon"
CD_DAEMON_ACCOUNT = "compute-domain-daemon-service-account"
SLICE_POLICY = "resourceslices-policy-nvidia-dra-driver"
#: Health service ports of the two plugin containers (the reference's defaults).
GPUS_HEALTH_PORT = 51516
COMPUTE_DOMAINS_HEALTH_PORT = 51515
MPS_GATE = "MPSSupport"
PASSTHROUGH_GATE = "PassthroughSupport"
DRIVER_ROOT = "/driver-root"

_NVIDIA = "resource.nvidia.com"
_RESOURCE = "resource.k8s.io"
_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]


@dataclass(frozen=True)
class _KubeletPlugin:
    """One of the kubelet plugin pod's containers, named, served and probed as the
    reference does."""

    container: str
    binary: str
    endpoint: str
    health_port: int
    liveness_period: int


_GPUS = _KubeletPlugin("gpus", "gpu-kubelet-plugin", ":8080", GPUS_HEALTH_PORT, 30)
_COMPUTE_DOMAINS = _KubeletPlugin(
    "compute-domains", "compute-domain-kubelet-plugin", ":8081", COMPUTE_DOMAINS_HEALTH_PORT, 10
)


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": component}


def _device_class(ctx: Ctx, name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": ctx.meta(name, namespaced=False),
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _gpu_class(ctx: Ctx, name: str, kind: str) -> dict[str, Any]:
    expression = (
        f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"
    )
    return _device_class(ctx, name, expression)


def _domain_class(ctx: Ctx, name: str, condition: str) -> dict[str, Any]:
    driver = "compute-domain.nvidia.com"
    expression = f"device.driver == '{driver}' && device.attributes['{driver}'].{condition}"
    return _device_class(ctx, name, expression)


class DRADriver(BaseOperand):
    """The DRA driver: its accounts and RBAC, DeviceClasses, ResourceSlice admission policy,
    kubelet-plugin DaemonSet and compute-domain controller Deployment."""

    name = "state-dra-driver"
    deploy_label = deploy_label("dra-driver")
    app = PLUGIN
    account = PLUGIN_ACCOUNT

    def enabled(self, policy: ClusterPolicy) -> bool:
        return on_dra_stack(policy)

    def _render(self, ctx: Ctx) -> Rendered:
        section = dra_section(ctx)
        domains = section.compute_domains.enabled
        objects = [*self._plugin_rbac(ctx, mps=bool(section.feature_gates.get(MPS_GATE)))]
        if domains:
            objects += self._domain_rbac(ctx)
        objects += [
            _gpu_class(ctx, "gpu.nvidia.com", "gpu"),
            _gpu_class(ctx, "mig.nvidia.com", "mig"),
            _gpu_class(ctx, "vfio.gpu.nvidia.com", "vfio"),
        ]
        if domains:
            objects += [
                _domain_class(ctx, "compute-domain-daemon.nvidia.com", "type == 'daemon'"),
                _domain_class(
                    ctx,
                    "compute-domain-default-channel.nvidia.com",
                    "type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0",
                ),
            ]
        objects += self._slice_policy(ctx)
        rendered = Rendered(objects=objects)
        image = _image(ctx, rendered)
        if image is None:
            return rendered
        rendered.objects.append(self._plugin(ctx, image))
        if domains:
            rendered.objects.append(self._controller(ctx, image))
        return rendered

    # -- RBAC ------------------------------------------------------------------------------

    def _plugin_rbac(self, ctx: Ctx, *, mps: bool) -> list[dict[str, Any]]:
        labels = _labels(PLUGIN)
        out = [account(ctx, PLUGIN_ACCOUNT, labels)]
        out += role_for(
            ctx,
            PLUGIN_ACCOUNT,
            PLUGIN_ACCOUNT,
            [
                rule([_NVIDIA], ["computedomains"], ["get", "list", "watch"]),
                rule([_RESOURCE], ["resourceclaims"], ["get", "list", "watch"]),
                rule(
                    [_RESOURCE],
                    ["resourceslices"],
                    ["get", "list", "watch", "create", "update", "delete"],
                ),
                rule([""], ["nodes"], ["get", "list", "watch", "update", "patch"]),
                rule([""], ["pods"], ["get", "list", "watch"]),
            ],
            cluster=True,
        )
        out += role_for(
            ctx,
            f"{PLUGIN_ACCOUNT}-driver-validation",
            PLUGIN_ACCOUNT,
            [rule(["apps"], ["daemonsets"], ["list"])],
        )
        if mps:
            out += role_for(
                ctx, f"{PLUGIN_ACCOUNT}-mps", PLUGIN_ACCOUNT, [rule(["apps"], ["deployments"], _RW)]
            )
        return out

    def _domain_rbac(self, ctx: Ctx) -> list[dict[str, Any]]:
        out = [account(ctx, CONTROLLER, _labels(CONTROLLER))]
        watch = ["get", "list", "watch"]
        out += role_for(
            ctx,
            CONTROLLER,
            CONTROLLER,
            [
                rule([_NVIDIA], ["computedomains"], [*watch, "update"]),
                rule([_NVIDIA], ["computedomains/status"], ["update"]),
                rule(
                    [_RESOURCE], ["resourceclaimtemplates"], [*watch, "create", "update", "delete"]
                ),
                rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"]),
                rule([""], ["nodes"], [*watch, "update"]),
                rule([""], ["pods"], watch),
            ],
            cluster=True,
        )
        out += role_for(
            ctx,
            CONTROLLER,
            CONTROLLER,
            [
                rule(["apps"], ["daemonsets"], _RW),
                rule([_NVIDIA], ["computedomaincliques"], [*watch, "update"]),
            ],
        )
        out.append(account(ctx, CD_DAEMON_ACCOUNT, _labels(CD_DAEMON)))
        out += role_for(
            ctx,
            CD_DAEMON,
            CD_DAEMON_ACCOUNT,
            [
                rule(
                    [_NVIDIA],
                    ["computedomains", "computedomains/status"],
                    [*watch, "update", "patch"],
                ),
                rule([_NVIDIA], ["computedomaincliques"], [*watch, "create", "update", "patch"]),
                rule([""], ["pods"], [*watch, "patch"]),
            ],
            cluster=True,
        )
        out += role_for(
            ctx,
            PLUGIN_ACCOUNT,
            PLUGIN_ACCOUNT,
            [rule([_NVIDIA], ["computedomaincliques"], ["get"])],
        )
        return out

    # -- the ResourceSlice policy --------------------------------------------------------

    def _slice_policy(self, ctx: Ctx) -> list[dict[str, Any]]:
        user = f"system:serviceaccount:{ctx.namespace}:{PLUGIN_ACCOUNT}"
        target = '(request.operation == "DELETE" ? oldObject : object).spec'
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": ctx.meta(SLICE_POLICY, namespaced=False),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [_RESOURCE],
                            "apiVersions": ["v1", "v1beta1", "v1beta2"],
                            "operations": ["CREATE", "UPDATE", "DELETE"],
                            "resources": ["resourceslices"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "isRestrictedUser",
                        "expression": f'request.userInfo.username == "{user}"',
                    }
                ],
                "variables": [
                    {
                        "name": "userNodeName",
                        "expression": "request.userInfo.extra[?'authentication.kubernetes.io/"
                        "node-name'][0].orValue('')",
                    },
                    {"name": "objectNodeName", "expression": f'{target}.?nodeName.orValue("")'},
                    {
                        "name": "nodeSelectorValue",
                        "expression": f"{target}.?nodeSelector.orValue(null)",
                    },
                    {"name": "allNodesValue", "expression": f"{target}.?allNodes.orValue(false)"},
                ],
                "validations": [
                    {
                        "expression": 'variables.userNodeName != ""',
                        "message": "the DRA kubelet plugin's account writes ResourceSlices only "
                        "from a pod bound to a node (a token with the node-name claim)",
                    },
                    {
                        "expression": "variables.userNodeName == variables.objectNodeName || "
                        "variables.allNodesValue == true || variables.nodeSelectorValue != null",
                        "messageExpression": '"the DRA kubelet plugin on node \'" + '
                        "variables.userNodeName + \"' may write only that node's "
                        'ResourceSlices"',
                    },
                ],
            },
        }
        binding = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": ctx.meta(SLICE_POLICY, namespaced=False),
            "spec": {"policyName": SLICE_POLICY, "validationActions": ["Deny"]},
        }
        return [policy, binding]

    # -- the kubelet plugin ----------------------------------------------------------------

    def _plugin(self, ctx: Ctx, image: str) -> dict[str, Any]:
        section = dra_section(ctx)
        gates = section.feature_gates
        passthrough = bool(gates.get(PASSTHROUGH_GATE))
        gpus = _plugin_container(
            ctx,
            _GPUS,
            image,
            section.gpus.kubelet_plugin,
            extra_env=[env("HOST_ROOT", "/host")],
            after_env=[env("IMAGE_NAME", image)],
        )
        if passthrough:
            gpus["volumeMounts"] += [
                mount(
                    "lib-modules", "/lib/modules/", read_only=True, propagation="HostToContainer"
                ),
                mount("sysfs", "/sys/", propagation="Bidirectional"),
                mount("procfs", "/proc/", propagation="Bidirectional"),
            ]
        containers = [gpus]
        if section.compute_domains.enabled:
            containers.append(
                _plugin_container(
                    ctx,
                    _COMPUTE_DOMAINS,
                    image,
                    section.compute_domains.kubelet_plugin,
                    extra_env=[],
                    after_env=[env("GPU_CLIQUE_LABEL_ENABLED", "true")],
                )
            )
        volumes = [
            host_path("plugins-registry", ctx.kubelet_host_dir("plugins_registry")),
            host_path("plugins", ctx.kubelet_host_dir("plugins")),
            host_path("cdi", "/var/run/cdi"),
            host_path("host-root", "/"),
            host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
            host_path("validations", "/run/nvidia/validations", "DirectoryOrCreate"),
        ]
        if passthrough:
            volumes += [
                host_path("lib-modules", "/lib/modules/", "Directory"),
                host_path("sysfs", "/sys/", "Directory"),
                host_path("procfs", "/proc/", "Directory"),
            ]
        pod = {
            **pod_basics(ctx, account=PLUGIN_ACCOUNT),
            # Only the deploy label: the node labeller gives it to the GPU nodes of the
            # stack, and an admin takes it away to drain the plugin (last) off a node.
            "nodeSelector": {self.deploy_label: "true"},
            "affinity": node_affinity(GPU_NODE_TERMS),
            "initContainers": [_driver_validation(ctx)],
            "containers": containers,
            "volumes": volumes,
        }
        if section.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": s} for s in section.image_pull_secrets]
        labels = {**_labels(PLUGIN), "app": PLUGIN}
        return workload(ctx, "DaemonSet", labels=labels, selector={"app": PLUGIN}, pod=pod)

    # -- the compute-domain controller -----------------------------------------------------

    def _controller(self, ctx: Ctx, image: str) -> dict[str, Any]:
        section = dra_section(ctx)
        spec = section.compute_domains.controller
        envs = [
            env("HTTP_ENDPOINT", ":8080"),
            env("METRICS_PATH", "/metrics"),
            env("PPROF_PATH", ""),
            env("LOG_VERBOSITY", "4"),
            env("LOG_VERBOSITY_CD_DAEMON", "4"),
            env_field("POD_NAME", "metadata.name"),
            env_field("NAMESPACE", "metadata.namespace"),
            env("IMAGE_NAME", image),
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("LEADER_ELECTION_ENABLED", "false"),
            env("LEADER_ELECTION_LEASE_LOCK_NAME", CONTROLLER),
            env("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", ctx.namespace),
            env("LEADER_ELECTION_LEASE_DURATION", "15s"),
            env("LEADER_ELECTION_RENEW_DEADLINE", "10s"),
            env("LEADER_ELECTION_RETRY_PERIOD", "2s"),
            *_gates(ctx),
            *(env(e.name, e.value or "") for e in spec.env),
        ]
        container: dict[str, Any] = {
            "name": "compute-domain",
            "image": image,
            "command": ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"],
            "env": envs,
        }
        _pull_policy(ctx, container)
        _resources(container, spec.resources)
        control_plane = "node-role.kubernetes.io/control-plane"
        tolerations = [
            {"effect": "NoSchedule", "key": control_plane, "operator": "Exists"},
            {"effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists"},
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            *(t.to_dict() for t in ctx.spec.daemonsets.tolerations),
        ]
        pod: dict[str, Any] = {
            **pod_basics(ctx, account=CONTROLLER),
            "tolerations": tolerations,
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "preference": {
                                "matchExpressions": [{"key": control_plane, "operator": "Exists"}]
                            },
                            "weight": 100,
                        }
                    ]
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": CONTROLLER}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                            "weight": 100,
                        }
                    ]
                },
            },
            "containers": [container],
        }
        if section.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": s} for s in section.image_pull_secrets]
        labels = {**_labels(CONTROLLER), "app": CONTROLLER}
        return workload(ctx, "Deployment", labels=labels, selector={"app": CONTROLLER}, pod=pod)


def _image(ctx: Ctx, rendered: Rendered) -> str | None:
    section = dra_section(ctx)
    # The section's fields were validated with it (the image name's pattern among them).
    given = ImageSpec.model_construct(
        repository=section.repository, image=section.image, version=section.version
    )
    try:
        return ctx.image(IMAGE, given)
    except ValueError as exc:
        rendered.conditions.append(("ImageInvalid", f"{ctx.component}: {exc}"))
        return None


def _pull_policy(ctx: Ctx, container: dict[str, Any]) -> None:
    policy = dra_section(ctx).image_pull_policy
    if policy:
        container["imagePullPolicy"] = policy


def _resources(container: dict[str, Any], spec: ResourceRequirements) -> None:
    given = resources(spec)
    if given is not None:
        container["resources"] = given


def _gates(ctx: Ctx) -> list[dict[str, Any]]:
    """`FEATURE_GATES`: `Name=true,Other=false`, as the reference writes the map."""
    gates = dra_section(ctx).feature_gates
    if not gates:
        return []
    value = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))
    return [env("FEATURE_GATES", value)]


def _health_port(spec: DRAKubeletPluginSpec, default: int) -> int:
    """The container's health service port; 0 (no probes) when switched off."""
    check = spec.healthcheck or DRAHealthcheckSpec()
    if not check.enabled:
        return 0
    return check.port or default


def _plugin_container(
    ctx: Ctx,
    plugin: _KubeletPlugin,
    image: str,
    spec: DRAKubeletPluginSpec,
    *,
    extra_env: Sequence[dict[str, Any]],
    after_env: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """One container of the kubelet plugin: it reads the driver root the init container
    found (`driver-ready`), then runs the plugin's binary."""
    registry = ctx.kubelet_host_dir("plugins_registry")
    plugins = ctx.kubelet_host_dir("plugins")
    port = _health_port(spec, plugin.health_port)
    script = "\n".join(
        [
            "set -a",
            ". /run/nvidia/validations/driver-ready",
            "set +a",
            'if [ "${MASK_NVIDIA_DRIVER_PARAMS}" = "true" ]; then',
            "  cp /proc/driver/nvidia/params /root/gpu-params",
            "  sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params",
            "  mount --bind /root/gpu-params /proc/driver/nvidia/params",
            "fi",
            f'exec {plugin.binary} -v "${{LOG_VERBOSITY}}"',
        ]
    )
    envs = [
        env("HTTP_ENDPOINT", plugin.endpoint),
        env("METRICS_PATH", "/metrics"),
        env("LOG_VERBOSITY", "4"),
        env("MASK_NVIDIA_DRIVER_PARAMS", ""),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("CDI_ROOT", "/var/run/cdi"),
        *extra_env,
        env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
        env_field("NODE_NAME", "spec.nodeName"),
        env_field("NAMESPACE", "metadata.namespace"),
        *[e for e in after_env if e["name"] == "IMAGE_NAME"],
        env("KUBELET_REGISTRAR_DIRECTORY_PATH", registry),
        env("KUBELET_PLUGINS_DIRECTORY_PATH", plugins),
        env("HEALTHCHECK_PORT", str(port)),
        *[e for e in after_env if e["name"] != "IMAGE_NAME"],
        *_gates(ctx),
        *(env(e.name, e.value or "") for e in spec.env),
    ]
    container: dict[str, Any] = {
        "name": plugin.container,
        "image": image,
        "securityContext": dict(PRIVILEGED),
        "command": ["bash", "-c"],
        "args": [script],
        "env": envs,
        "volumeMounts": [
            mount("plugins-registry", registry),
            mount("plugins", plugins, propagation="Bidirectional"),
            mount("cdi", "/var/run/cdi"),
            mount("validations", "/run/nvidia/validations", read_only=True),
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("driver-install-dir", DRIVER_ROOT, propagation="HostToContainer"),
        ],
    }
    _pull_policy(ctx, container)
    if port:
        probe = {"grpc": {"port": port, "service": "liveness"}, "timeoutSeconds": 10}
        container["startupProbe"] = {**probe, "failureThreshold": 600, "periodSeconds": 1}
        container["livenessProbe"] = {
            **probe,
            "failureThreshold": 3,
            "periodSeconds": plugin.liveness_period,
        }
    _resources(container, spec.resources)
    return container


def _driver_validation(ctx: Ctx) -> dict[str, Any]:
    """The init container that waits for a working driver (an NVIDIADriver's container or
    one installed on the host) and writes where it is for the plugin's containers."""
    container: dict[str, Any] = {
        "name": "driver-validation",
        "image": ctx.validator_image,
        "command": ["nvidia-validator"],
        "securityContext": dict(AS_ROOT),
        "env": [
            env("COMPONENT", "driver"),
            env("WITH_WAIT", "true"),
            # `nvidia-smi --version` only: the GPUs may be bound to vfio-pci.
            env("DRIVER_VALIDATION_SKIP_GPU_INIT", "true"),
            # The plugin makes the device nodes it hands out itself.
            env("DISABLE_DEV_CHAR_SYMLINK_CREATION", "true"),
            env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
            env("HOST_ROOT", "/"),
            env(
                "DRIVER_INSTALL_DIR",
                ctx.spec.host_paths.driver_install_dir or DEFAULT_DRIVER_INSTALL_DIR,
            ),
            env("DRIVER_INSTALL_DIR_CTR_PATH", DRIVER_ROOT),
        ],
        "volumeMounts": [
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("driver-install-dir", DRIVER_ROOT, propagation="HostToContainer"),
            mount("validations", "/run/nvidia/validations"),
        ],
    }
    _pull_policy(ctx, container)
    return container
