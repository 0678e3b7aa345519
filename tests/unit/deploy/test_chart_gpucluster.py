"""The chart's GPUCluster: `gpuCluster.deployCR` and `draDriver.*` taken as NVIDIA's chart
takes them, rendered as a GPUCluster the CRD accepts, and never beside a ClusterPolicy."""

from __future__ import annotations

import pytest
import yaml

from components.offline import validate_document, validate_text
from tests.unit.deploy.test_chart import HELMS, REFERENCE_VALUES, one, refused, render

pytestmark = pytest.mark.unit

DRA = ("--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.deployCR=false")


def test_no_gpucluster_unless_asked() -> None:
    for values in ((), ("--values", str(REFERENCE_VALUES))):
        assert not [d for d in render(*values) if d["kind"] == "GPUCluster"]


def test_deploy_cr_renders_the_gpucluster_from_the_dra_driver_values() -> None:
    docs = render(*DRA)
    cluster = one(docs, "GPUCluster", "gpu-cluster")
    assert not [d for d in docs if d["kind"] == "ClusterPolicy"]
    reference = yaml.safe_load(REFERENCE_VALUES.read_text())
    # Our defaults are the reference chart's, key for key.
    assert cluster["spec"]["draDriver"] == reference["draDriver"]
    assert cluster["spec"]["dcgmExporter"]["enabled"] is True
    assert cluster["spec"]["hostPaths"]["kubeletRootDir"] == "/var/lib/kubelet"
    assert validate_document(cluster) == []


def test_the_reference_values_file_with_dra_on_gives_a_valid_gpucluster() -> None:
    docs = render("--values", str(REFERENCE_VALUES), *DRA)
    cluster = one(docs, "GPUCluster")
    assert cluster["spec"]["dcgmExporter"]["serviceMonitor"]["interval"] == "15s"
    assert validate_document(cluster) == []


def test_dra_driver_settings_reach_the_gpucluster() -> None:
    cluster = one(
        render(
            *DRA,
            "--set", "draDriver.version=v0.6.0",
            "--set", "draDriver.featureGates.MPSSupport=true",
            "--set", "draDriver.computeDomains.enabled=false",
            "--set", "draDriver.gpus.kubeletPlugin.healthcheck.port=6000",
        ),
        "GPUCluster",
    )  # fmt: skip
    dra = cluster["spec"]["draDriver"]
    assert dra["version"] == "v0.6.0"
    assert dra["featureGates"] == {"MPSSupport": True}
    assert dra["computeDomains"]["enabled"] is False
    assert dra["gpus"]["kubeletPlugin"] == {"healthcheck": {"port": 6000}}
    assert validate_document(cluster) == []


@pytest.mark.parametrize("helm", HELMS)
def test_both_crs_at_once_is_refused_naming_both_values(helm: str) -> None:
    message = refused("--set", "gpuCluster.deployCR=true", helm=helm)
    assert "gpuCluster.deployCR and clusterPolicy.deployCR are both true" in message


def test_a_misspelt_dra_driver_key_is_refused_by_name() -> None:
    message = refused(*DRA, "--set", "draDriver.verison=v1")
    assert "/draDriver" in message and "verison" in message


def test_what_the_chart_renders_passes_validate_as_one_file() -> None:
    """The whole release as `validate` reads a rendered chart: one GPUCluster, no policy."""
    docs = render(*DRA)
    report = validate_text(yaml.safe_dump_all(docs), "release.yaml")
    assert report.ok, list(report.lines())
