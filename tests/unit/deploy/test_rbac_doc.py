"""docs/rbac.md's table is the whole truth: every ServiceAccount we ship or render, each
right it holds, and a reason; nothing in it that is not granted, nothing granted that it
does not list. A rule added anywhere without a line (and a why) there fails here."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
import yaml

from tests.tools import REPO
from tests.unit.components.operands.test_operand_rbac import (
    every_dra_operand_rbac,
    every_operand_rbac,
)
from tests.unit.deploy.test_chart import render

pytestmark = pytest.mark.unit

DOC = REPO / "docs" / "rbac.md"
CLUSTER, NAMESPACED = "cluster", "its namespace"
Grant = tuple[str, str, str, tuple[str, ...], str]
"""(account, where, resource as the table writes it, resource names, verb)."""


def grants(account: str, where: str, rules: Iterable[Mapping[str, Any]]) -> set[Grant]:
    return {
        (
            account,
            where,
            f"{group}/{resource}" if group else resource,
            tuple(rule.get("resourceNames") or ()),
            verb,
        )
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def shipped() -> tuple[set[Grant], set[str]]:
    """What is granted, and every account."""
    out: set[Grant] = set()
    for name, where in (("cluster_role.yaml", CLUSTER), ("role.yaml", NAMESPACED)):
        (role,) = [
            d
            for d in yaml.safe_load_all((REPO / "config" / "rbac" / name).read_text())
            if d["metadata"]["name"] == "gpu-operator"
        ]
        out |= grants("gpu-operator", where, role["rules"])
    (hooks,) = [
        d
        for d in render()
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpu-operator-hooks"
    ]
    out |= grants("gpu-operator-hooks", CLUSTER, hooks["rules"])
    objects = [*every_operand_rbac(), *every_dra_operand_rbac()]
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    for binding in (o for o in objects if o["kind"].endswith("Binding")):
        ref = binding["roleRef"]
        where = CLUSTER if ref["kind"] == "ClusterRole" else NAMESPACED
        for subject in binding["subjects"]:
            out |= grants(subject["name"], where, roles[(ref["kind"], ref["name"])]["rules"])
    accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
    return out, accounts | {"gpu-operator", "gpu-operator-hooks"}


def table() -> list[Sequence[str]]:
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Account |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def documented() -> tuple[set[Grant], set[str]]:
    out: set[Grant] = set()
    accounts: set[str] = set()
    for account, where, resources, verbs, why in table():
        name = account.strip("`")
        accounts.add(name)
        assert why, f"{name}: no reason given"
        if resources == "—":
            continue
        listed, _, named = resources.partition(" named ")
        names = tuple(re.findall(r"`([^`]+)`", named))
        for resource in re.findall(r"`([^`]+)`", listed):
            for verb in verbs.split(", "):
                out.add((name, where, resource, names, verb))
    return out, accounts


def test_the_table_lists_every_account_and_right_and_nothing_else() -> None:
    granted, accounts = shipped()
    written, written_accounts = documented()
    assert written_accounts == accounts
    assert sorted(granted - written) == [], "granted but not in docs/rbac.md"
    assert sorted(written - granted) == [], "in docs/rbac.md but not granted"


def test_every_account_without_rights_says_so() -> None:
    granted, accounts = shipped()
    holding = {g[0] for g in granted}
    empty = {row[0].strip("`") for row in table() if row[2] == "—"}
    assert empty == accounts - holding
