"""The README's install section, as written: the commands name the paths, release and
namespace that tests/e2e/helm runs, and `kubectl apply -k config/default` can work in one
step because kustomize renders the Namespace and the CRDs before anything that needs them
(kubectl applies in the order it is given)."""

from __future__ import annotations

import re

import yaml

from components.offline import KINDS
from tests.tools import CHART, REPO, run

README = (REPO / "README.md").read_text()


def install_section() -> str:
    start = README.index("## Running it in a cluster")
    return README[start : README.index("\n## ", start + 1)]


def shell_lines(text: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_commands_are_the_tested_install_paths() -> None:
    lines = shell_lines(install_section())
    assert "kubectl apply -k config/default" in lines
    assert (REPO / "config" / "default" / "kustomization.yaml").is_file()
    helm_install = next(line for line in lines if line.startswith("helm install"))
    words = helm_install.split()
    assert words[2] == "gpu-operator" and REPO / words[3] == CHART
    assert words[words.index("-n") + 1] == "gpu-operator"
    assert "kubectl create namespace gpu-operator" in lines
    assert (
        "kubectl label namespace gpu-operator pod-security.kubernetes.io/enforce=privileged"
        in lines
    )


def test_kustomize_renders_namespace_and_crds_first() -> None:
    rendered = run("kustomize", "build", REPO / "config" / "default").stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    first = ["Namespace", *["CustomResourceDefinition"] * len(KINDS)]
    assert kinds[: len(first)] == first
    assert not {"Namespace", "CustomResourceDefinition"} & set(kinds[len(first) :])
    namespace = yaml.safe_load((REPO / "config" / "default" / "kustomization.yaml").read_text())
    assert namespace["namespace"] == "gpu-operator"
