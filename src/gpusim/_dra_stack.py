"""NVIDIA's DRA stack as objects to create directly: STAND-INS for what the operator's
GPUCluster controller renders (the kubelet plugin's ServiceAccount and RBAC, the
DeviceClasses, the ResourceSlice admission policy and binding, the kubelet-plugin
DaemonSet, the DRA validation). `bench/scale.py --dra-floor` times them as the floor a
GPUCluster run is held to.

Only what the simulated cluster reads is here: the plugin pod's `app` label and
ServiceAccount (the GPU node behaviour writes the node's ResourceSlice as that account,
`gpusim._dra`), the deploy labels the DaemonSets select nodes by, and a policy that lets a
node's plugin write only its own node's slices (same rule as the reference's, in words of
our own). The DRA e2e tests now create a GPUCluster and let the operator render the
stack; this module stays as the floor's objects.
"""

from __future__ import annotations

from typing import Any

from reconciler import namespace_of

NAMESPACE = "gpu-operator"
PLUGIN_ACCOUNT = "nvidia-dra-driver-kubeletplugin"
PLUGIN_DAEMONSET = "nvidia-dra-driver-kubelet-plugin"
PLUGIN_APP = "nvidia-dra-driver-kubelet-plugin"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"
VALIDATOR_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-validator"
NODE_LABELS = {DEPLOY_LABEL: "true", VALIDATOR_DEPLOY_LABEL: "true"}
"""What the operator's node labelling gives each GPU node for the DRA stack to run there."""
VALIDATOR = "nvidia-dra-validator"
VALIDATOR_APP = "nvidia-operator-validator"
VALIDATOR_CLAIM_TEMPLATE = "nvidia-dra-validator-gpu"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
POLICY = "resourceslices-policy-nvidia-dra-driver"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"
DRIVER = "gpu.nvidia.com"
OTHER_NODE_REFUSED = "may write only the ResourceSlices of its own node"
"""Part of the stand-in policy's message for a plugin writing another node's slice."""


def _device_class(name: str, device_type: str) -> dict[str, Any]:
    expression = (
        f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{device_type}'"
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _policy() -> list[dict[str, Any]]:
    """Each node's plugin may write the slices of its own node only (and cluster-wide
    ones), as told by the node name its pod-bound token carries."""
    target = '(request.operation == "DELETE" ? oldObject : object)'
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE", "DELETE"],
                            "resources": ["resourceslices"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "plugin",
                        "expression": (
                            "request.userInfo.username == "
                            f"'system:serviceaccount:{NAMESPACE}:{PLUGIN_ACCOUNT}'"
                        ),
                    }
                ],
                "variables": [
                    {
                        "name": "node",
                        "expression": "request.userInfo.extra"
                        "[?'authentication.kubernetes.io/node-name'][0].orValue('')",
                    },
                    {"name": "sliceNode", "expression": f"{target}.spec.?nodeName.orValue('')"},
                    {
                        "name": "clusterWide",
                        "expression": f"{target}.spec.?allNodes.orValue(false) || "
                        f"{target}.spec.?nodeSelector.orValue(null) != null",
                    },
                ],
                "validations": [
                    {
                        "expression": "variables.node != ''",
                        "message": "the plugin's token names no node: it must run in a pod",
                    },
                    {
                        "expression": "variables.node == variables.sliceNode || "
                        "variables.clusterWide",
                        "messageExpression": (
                            f"'the plugin on node ' + variables.node + ' {OTHER_NODE_REFUSED}'"
                        ),
                    },
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY},
            "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
        },
    ]


def _plugin_rbac() -> list[dict[str, Any]]:
    rules = [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        },
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    ]
    return [
        _service_account(PLUGIN_ACCOUNT),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": PLUGIN_ACCOUNT},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": PLUGIN_ACCOUNT},
            "subjects": [
                {"kind": "ServiceAccount", "name": PLUGIN_ACCOUNT, "namespace": NAMESPACE}
            ],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": PLUGIN_ACCOUNT,
            },
        },
    ]


def _service_account(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _in_namespace(name)}


def _in_namespace(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, **more}


def _daemonset(
    name: str,
    account: str,
    labels: dict[str, str],
    selector: dict[str, str],
    deploy_label: str,
    pod: dict[str, Any],
) -> dict[str, Any]:
    """A DaemonSet running as `account` on the nodes labelled `deploy_label`,
    which is how the simulated stack picks its nodes (the GPU node behaviour labels them)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _in_namespace(name, labels=labels),
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": account,
                    "nodeSelector": {deploy_label: "true"},
                    **pod,
                },
            },
        },
    }


def _validation() -> list[dict[str, Any]]:
    """The DRA validation: a pod per GPU node claiming one GPU there with admin access
    (never reserved, so it holds no GPU a workload could get)."""
    request = {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
        "adminAccess": True,
    }
    labels = {"app": VALIDATOR_APP, "app.kubernetes.io/name": VALIDATOR}
    container = {
        "name": "gpu-validation",
        "image": PLUGIN_IMAGE,
        "resources": {"claims": [{"name": "validation-gpu"}]},
    }
    return [
        _service_account(VALIDATOR),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": _in_namespace(VALIDATOR_CLAIM_TEMPLATE),
            "spec": {
                "spec": {"devices": {"requests": [{"name": "validation-gpu", "exactly": request}]}}
            },
        },
        _daemonset(
            VALIDATOR,
            VALIDATOR,
            labels,
            {"app.kubernetes.io/name": VALIDATOR},
            VALIDATOR_DEPLOY_LABEL,
            {
                "resourceClaims": [
                    {
                        "name": "validation-gpu",
                        "resourceClaimTemplateName": VALIDATOR_CLAIM_TEMPLATE,
                    }
                ],
                "containers": [container],
            },
        ),
    ]


def dra_stack() -> list[dict[str, Any]]:
    """The objects, in the order they are created (`collection_path` says where). The
    namespace allows admin access to devices, which the validation's claims ask for."""
    namespace = {"name": NAMESPACE, "labels": {ADMIN_ACCESS_LABEL: "true"}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace},
        *_plugin_rbac(),
        _device_class("gpu.nvidia.com", "gpu"),
        _device_class("mig.nvidia.com", "mig"),
        *_policy(),
        _daemonset(
            PLUGIN_DAEMONSET,
            PLUGIN_ACCOUNT,
            {"app": PLUGIN_APP},
            {"app": PLUGIN_APP},
            DEPLOY_LABEL,
            {"containers": [{"name": "gpus", "image": PLUGIN_IMAGE}]},
        ),
        *_validation(),
    ]


_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ValidatingAdmissionPolicy": (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    ),
    "ValidatingAdmissionPolicyBinding": (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    ),
    "DaemonSet": "/apis/apps/v1/namespaces/{namespace}/daemonsets",
    "ResourceClaimTemplate": (
        "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates"
    ),
}


def collection_path(obj: dict[str, Any]) -> str:
    """Where `dra_stack()`'s object is created (POST)."""
    return _COLLECTIONS[obj["kind"]].format(namespace=namespace_of(obj))
