"""The operator image, without a container engine: its base is pinned by digest, it installs
only hash-pinned, locked runtime dependencies that match pyproject.toml, leaves the simulator
and the test control plane out, and hack/image.sh labels it with pyproject's version."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.tools import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
RUNTIME_LOCK = REPO / "requirements.lock"
BUILD_LOCK = REPO / "requirements-build.lock"
DIRECT = "# via gpu-operator (pyproject.toml)"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments out."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def locked(path: Path) -> dict[str, tuple[Version, list[str], list[str]]]:
    """name -> (pinned version, its hashes, what it is there for) of a `uv pip compile` lock."""
    entries: dict[str, tuple[Version, list[str], list[str]]] = {}
    current = ""
    for raw in path.read_text().splitlines():
        line = raw.strip().rstrip("\\").strip()
        # A pin may carry an environment marker (`cffi==2.1.1 ; platform_python_...`).
        if match := re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)(?:\s*;.*)?", line):
            current = canonicalize_name(match[1])
            entries[current] = (Version(match[2]), [], [])
        elif line.startswith("--hash="):
            entries[current][1].append(line)
        elif line.startswith("#") and current and raw.startswith("    #"):
            via = line.removeprefix("#").strip().removeprefix("via").strip()
            if via:
                entries[current][2].append(via)
        elif line and not line.startswith("#"):
            pytest.fail(f"{path.name}: unexpected line {raw!r}")
    return entries


def runtime_requirements() -> dict[str, Requirement]:
    return {
        canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["project"]["dependencies"])
    }


def test_every_base_image_is_pinned_by_digest() -> None:
    args = dict(a.split("=", 1) for kind, a in instructions() if kind == "ARG" and "=" in a)
    bases = [a.split()[0] for kind, a in instructions() if kind == "FROM"]
    assert len(bases) >= 2, "a build stage and a final stage"
    stages = {a.split()[-1] for kind, a in instructions() if kind == "FROM" and " AS " in a.upper()}
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m[1], ""), base)
        assert image in stages or re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image), (
            f"FROM {base} ({image}) is not pinned by digest"
        )


def test_lock_holds_exactly_the_runtime_dependencies_of_pyproject() -> None:
    lock = locked(RUNTIME_LOCK)
    wanted = runtime_requirements()
    direct = {name for name, (_, _, via) in lock.items() if "gpu-operator (pyproject.toml)" in via}
    assert direct == set(wanted), "run `bash hack/lock.sh`"
    for name, requirement in wanted.items():
        assert lock[name][0] in requirement.specifier, (
            f"{name}=={lock[name][0]} does not satisfy {requirement}; run `bash hack/lock.sh`"
        )
    # Everything else is there because a locked package needs it: nothing stale, no extras.
    for name, (_, _, via) in lock.items():
        needed_by = {canonicalize_name(v.split()[0]) for v in via if "pyproject.toml" not in v}
        assert name in direct or needed_by & set(lock), f"{name} is locked but nothing needs it"
    development_only = {"pytest", "mypy", "ruff", "hypothesis", "import-linter"}
    assert not development_only & set(lock)


def test_build_lock_holds_the_build_backend_of_pyproject() -> None:
    lock = locked(BUILD_LOCK)
    for requirement in map(Requirement, PYPROJECT["build-system"]["requires"]):
        name = canonicalize_name(requirement.name)
        assert name in lock and lock[name][0] in requirement.specifier, "run `bash hack/lock.sh`"


@pytest.mark.parametrize("lock", [RUNTIME_LOCK, BUILD_LOCK], ids=lambda p: p.name)
def test_every_locked_requirement_has_hashes(lock: Path) -> None:
    entries = locked(lock)
    assert entries
    for name, (_, hashes, _) in entries.items():
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), name


def test_image_installs_from_the_locks_only_and_leaves_development_code_out() -> None:
    runs = [a for kind, a in instructions() if kind == "RUN"]
    installs = [i for run in runs for i in run.split("&&") if re.search(r"\bpip install\b", i)]
    for lock in (RUNTIME_LOCK, BUILD_LOCK):
        [install] = [i for i in installs if lock.name in i]
        assert "--require-hashes" in install and "--no-deps" in install, install
    for install in installs:
        assert "-r " in install or re.search(r"--no-deps /wheels/\S+\.whl", install), (
            f"installs something outside the locks: {install}"
        )
    # Every package the wheel carries besides the operator's own is deleted before the final
    # stage copies the virtualenv.
    packages = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    removed = " ".join(run for run in runs if "rm -rf" in run)
    for package in packages:
        name = Path(package).name
        if name not in ("components", "reconciler"):
            assert f'"${{site}}/{name}"' in removed, f"{name} would ship in the image"
    assert '"${site}/reconciler/envtest"' in removed


def test_every_copied_path_is_in_the_build_context() -> None:
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for kind, args in instructions():
        if kind == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert source.rstrip("/") in allowed, f"COPY {source}: left out by .dockerignore"
                assert (REPO / source).exists(), source


def fake_engine(directory: Path, name: str) -> Path:
    """A stand-in for docker/podman that records the arguments it was called with."""
    log = directory / "calls"
    script = directory / name
    script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def image_sh(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    python = path / "python3"
    if not python.exists():
        python.symlink_to(sys.executable)
    for tool in ("dirname",):
        if not (path / tool).exists() and (found := shutil.which(tool)):
            (path / tool).symlink_to(found)
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", REPO / "hack" / "image.sh", *args],
        env={"PATH": str(path), "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_image_sh_builds_with_the_engine_present_labelled_with_pyproject_version(
    tmp_path: Path, engine: str
) -> None:
    log = fake_engine(tmp_path, engine)
    done = image_sh(tmp_path)
    assert done.returncode == 0, done.stderr
    version = PYPROJECT["project"]["version"]
    assert log.read_text().split() == [
        engine,
        "build",
        "--build-arg",
        f"VERSION={version}",
        "--tag",
        f"gpu-operator:{version}",
        ".",
    ]
    assert 'org.opencontainers.image.version="${VERSION}"' in DOCKERFILE


def test_image_sh_says_when_there_is_no_engine(tmp_path: Path) -> None:
    done = image_sh(tmp_path)
    assert done.returncode != 0
    assert "neither docker nor podman is installed" in done.stderr


def test_readme_docker_build_passes_the_current_version() -> None:
    readme = (REPO / "README.md").read_text()
    version = PYPROJECT["project"]["version"]
    assert f"docker build --build-arg VERSION={version} -t gpu-operator:{version} ." in readme
