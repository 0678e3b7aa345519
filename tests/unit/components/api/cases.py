"""Documents the API must accept or reject, shared by the unit tests (offline `validate`,
pydantic) and the integration tests (the real API server), so all three give one verdict.

A case is a document and, for invalid ones, the field the rejection must name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[4]


#: The reference's samples and CRDs, copied unchanged from the workplace's
#: `../shared/compat/` (see its README) so a fresh clone has them too: data to test against.
COMPAT = REPO / "tests" / "fixtures" / "compat"
SAMPLES = REPO / "config" / "samples"
COMPAT_FILES = sorted(COMPAT.glob("nvidia-*-sample.yaml"))
REFERENCE_CRDS = {
    "ClusterPolicy": COMPAT / "reference-crd-clusterpolicies.yaml",
    "NVIDIADriver": COMPAT / "reference-crd-nvidiadrivers.yaml",
    "GPUCluster": COMPAT / "reference-crd-gpuclusters.yaml",
}
SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml"))


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def policy(spec: dict[str, Any], name: str = "policy") -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name},
        "spec": copy.deepcopy(spec),
    }


def driver(spec: dict[str, Any], name: str = "driver") -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": copy.deepcopy(spec),
    }


@dataclass(frozen=True)
class Invalid:
    id: str
    document: dict[str, Any]
    #: The field the rejection names (offline path; the API server says the same path).
    path: str
    #: Words the offline message contains.
    says: str
    #: The API server only rejects it with fieldValidation=Strict (unknown fields).
    strict_only: bool = False


@dataclass(frozen=True)
class Valid:
    id: str
    document: dict[str, Any] = field(default_factory=dict)


INVALID: list[Invalid] = [
    Invalid(
        "unknown-mig-strategy",
        policy({"mig": {"strategy": "weird"}}),
        "spec.mig.strategy",
        'unsupported value "weird"',
    ),
    Invalid(
        "negative-max-parallel-upgrades",
        policy({"driver": {"upgradePolicy": {"maxParallelUpgrades": -1}}}),
        "spec.driver.upgradePolicy.maxParallelUpgrades",
        "greater than or equal to 0",
    ),
    Invalid(
        "max-unavailable-abc",
        policy({"driver": {"upgradePolicy": {"maxUnavailable": "abc"}}}),
        "spec.driver.upgradePolicy.maxUnavailable",
        "percentage",
    ),
    Invalid(
        "max-unavailable-over-100-percent",
        policy({"driver": {"upgradePolicy": {"maxUnavailable": "150%"}}}),
        "spec.driver.upgradePolicy.maxUnavailable",
        "percentage",
    ),
    Invalid(
        "max-unavailable-negative",
        policy({"driver": {"upgradePolicy": {"maxUnavailable": -2}}}),
        "spec.driver.upgradePolicy.maxUnavailable",
        "non-negative",
    ),
    Invalid(
        "max-unavailable-boolean",
        policy({"driver": {"upgradePolicy": {"maxUnavailable": True}}}),
        "spec.driver.upgradePolicy.maxUnavailable",
        "integer or a string",
    ),
    Invalid(
        "string-for-boolean",
        policy({"devicePlugin": {"enabled": "yes"}}),
        "spec.devicePlugin.enabled",
        "must be of type boolean",
    ),
    Invalid(
        "mig-pod-deletion-string-for-boolean",
        policy({"migManager": {"podDeletion": {"force": "yes"}}}),
        "spec.migManager.podDeletion.force",
        "must be of type boolean",
    ),
    Invalid(
        "number-for-string",
        policy({"driver": {"version": 535.1}}),
        "spec.driver.version",
        "must be of type string",
    ),
    Invalid(
        "map-for-list",
        policy({"toolkit": {"env": {"CONTAINERD_CONFIG": "/etc/containerd/config.toml"}}}),
        "spec.toolkit.env",
        "must be of type array",
    ),
    Invalid(
        "string-for-section",
        policy({"dcgmExporter": "enabled"}),
        "spec.dcgmExporter",
        "must be of type object",
    ),
    Invalid(
        "env-without-name",
        policy({"toolkit": {"env": [{"value": "x"}]}}),
        "spec.toolkit.env[0].name",
        "required",
    ),
    Invalid(
        "unknown-kernel-module-type",
        policy({"driver": {"kernelModuleType": "closed"}}),
        "spec.driver.kernelModuleType",
        "unsupported value",
    ),
    Invalid(
        "probe-timeout-zero",
        policy({"driver": {"startupProbe": {"timeoutSeconds": 0}}}),
        "spec.driver.startupProbe.timeoutSeconds",
        "greater than or equal to 1",
    ),
    Invalid(
        "precompiled-with-digest",
        policy({"driver": {"usePrecompiled": True, "version": "sha256:" + "a" * 64}}),
        "spec.driver.version",
        "sha256 digest",
    ),
    Invalid(
        "device-plugin-default-config-without-name",
        policy({"devicePlugin": {"config": {"default": "time-sliced"}}}),
        "spec.devicePlugin.config.name",
        "name must be set",
    ),
    Invalid(
        "daemonsets-max-unavailable-word",
        policy({"daemonsets": {"rollingUpdate": {"maxUnavailable": "one"}}}),
        "spec.daemonsets.rollingUpdate.maxUnavailable",
        "percentage",
    ),
    Invalid(
        "unknown-update-strategy",
        policy({"daemonsets": {"updateStrategy": "Recreate"}}),
        "spec.daemonsets.updateStrategy",
        "unsupported value",
    ),
    Invalid(
        "relative-install-dir",
        policy({"toolkit": {"installDir": "usr/local/nvidia"}}),
        "spec.toolkit.installDir",
        "does not match",
    ),
    Invalid(
        "unknown-field-in-a-sandbox-section",
        policy({"gdrcopy": {"enabled": False, "future": {"anything": [1, "two"]}}}),
        "spec.gdrcopy.future",
        'unknown field "future"',
        strict_only=True,
    ),
    Invalid(
        "sandbox-mode-outside-the-enum",
        policy({"sandboxWorkloads": {"enabled": True, "mode": "firecracker"}}),
        "spec.sandboxWorkloads.mode",
        "firecracker",
    ),
    Invalid(
        "rolling-update-max-unavailable-is-a-string",
        policy({"daemonsets": {"rollingUpdate": {"maxUnavailable": 1}}}),
        "spec.daemonsets.rollingUpdate.maxUnavailable",
        "string",
    ),
    Invalid(
        "unknown-field",
        policy({"driver": {"upgradePolicy": {"maxParalelUpgrades": 2}}}),
        "spec.driver.upgradePolicy.maxParalelUpgrades",
        'unknown field "maxParalelUpgrades" (did you mean "maxParallelUpgrades"?)',
        strict_only=True,
    ),
    Invalid(
        "default-driver-with-node-selector",
        driver({"default": True, "nodeSelector": {"pool": "a100"}}),
        "spec.nodeSelector",
        "default NVIDIADriver must not use nodeSelector",
    ),
    Invalid(
        "driver-max-unavailable-abc",
        driver({"upgradePolicy": {"maxUnavailable": "abc"}}),
        "spec.upgradePolicy.maxUnavailable",
        "percentage",
    ),
    Invalid(
        "driver-negative-max-parallel-upgrades",
        driver({"upgradePolicy": {"maxParallelUpgrades": -3}}),
        "spec.upgradePolicy.maxParallelUpgrades",
        "greater than or equal to 0",
    ),
    Invalid(
        "unknown-driver-type",
        driver({"driverType": "cpu"}),
        "spec.driverType",
        'unsupported value "cpu"',
    ),
    Invalid(
        "driver-node-selector-values-not-strings",
        driver({"nodeSelector": {"pool": 1}}),
        "spec.nodeSelector.pool",
        "must be of type string",
    ),
]

VALID: list[Valid] = [
    Valid("empty-spec", policy({})),
    Valid("null-sections", policy({"validator": {"plugin": None}, "gds": None, "cdi": None})),
    Valid("max-unavailable-int", policy({"driver": {"upgradePolicy": {"maxUnavailable": 3}}})),
    Valid("max-unavailable-zero", policy({"driver": {"upgradePolicy": {"maxUnavailable": 0}}})),
    Valid(
        "max-unavailable-100-percent",
        policy({"driver": {"upgradePolicy": {"maxUnavailable": "100%"}}}),
    ),
    Valid(
        "daemonsets-max-unavailable-string-count",
        policy({"daemonsets": {"rollingUpdate": {"maxUnavailable": "2"}}}),
    ),
    Valid(
        "precompiled-with-branch", policy({"driver": {"usePrecompiled": True, "version": "595"}})
    ),
    Valid("digest-version", policy({"driver": {"version": "sha256:" + "b" * 64}})),
    Valid(
        "mig-pod-deletion",
        policy({"migManager": {"podDeletion": {"force": True, "deleteEmptyDir": True}}}),
    ),
    Valid(
        "sandbox-sections",
        policy(
            {
                "sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"},
                "vgpuManager": {"enabled": True, "driverManager": {"env": [{"name": "A"}]}},
                "kataManager": {
                    "config": {
                        "artifactsDir": "/opt/nvidia-gpu-operator/x",
                        "runtimeClasses": [
                            {"name": "kata-nvidia-gpu", "artifacts": {"url": "nvcr.io/x:1"}}
                        ],
                    }
                },
                "ccManager": {"enabled": False, "defaultMode": "off"},
                "gdrcopy": {"enabled": False, "args": ["--verbose"]},
            }
        ),
    ),
    Valid(
        "service-monitor",
        policy(
            {
                "dcgmExporter": {
                    "serviceMonitor": {
                        "enabled": True,
                        "interval": "15s",
                        "additionalLabels": {"release": "prometheus"},
                        "relabelings": [
                            {
                                "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                "targetLabel": "instance",
                                "action": "replace",
                            }
                        ],
                    }
                }
            }
        ),
    ),
    Valid("driver-defaults", driver({})),
    Valid("default-driver-empty-selector", driver({"default": True, "nodeSelector": {}})),
    Valid("pool-driver", driver({"nodeSelector": {"pool": "h100"}, "usePrecompiled": True})),
]
