"""`gpu-operator validate` and the real API server give the same verdict on generated
ClusterPolicies: both accept, or both reject naming the same fields.

Hypothesis varies the fields whose rules are most easily got wrong offline: enums,
patterns (anchored and not), int-or-string values, integer bounds and formats, and the
fields with CEL rules, each with valid and invalid values, several at a time."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from components.offline import CLUSTER_POLICY, validate_text
from components.offline._crd import object_schema
from tests.integration.components.test_api_crds import install_crds, reason

pytestmark = pytest.mark.integration

Path = tuple[str, ...]

_digits_and_units = st.text(alphabet="0123456789%smhd.-+aGiKM", max_size=6)

FIELDS: dict[Path, st.SearchStrategy[Any]] = {
    ("mig", "strategy"): st.sampled_from(["none", "single", "mixed", "Single", "", "weird"]),
    ("driver", "kernelModuleType"): st.sampled_from(["auto", "open", "proprietary", "closed"]),
    ("daemonsets", "updateStrategy"): st.sampled_from(["RollingUpdate", "OnDelete", "Recreate"]),
    ("ccManager", "defaultMode"): st.sampled_from(["on", "off", "devtools", "On"]),
    ("migManager", "config", "default"): st.sampled_from(["all-disabled", "", "all-enabled"]),
    ("driver", "upgradePolicy", "maxUnavailable"): st.one_of(
        st.integers(-3, 200),
        st.sampled_from(["0%", "25%", "100%", "101%", "5", "abc", "", "-5%", "007%", "1.5%"]),
        _digits_and_units,
    ),
    ("daemonsets", "rollingUpdate", "maxUnavailable"): st.one_of(
        st.sampled_from(["1", "25%", "100%", "101%", "07", "", "x"]), _digits_and_units
    ),
    ("driver", "upgradePolicy", "maxParallelUpgrades"): st.integers(-3, 3),
    ("driver", "livenessProbe", "periodSeconds"): st.one_of(
        st.integers(-1, 3), st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63])
    ),
    ("dcgm", "hostPort"): st.one_of(st.integers(-1, 70000), st.sampled_from([2**31, -(2**31)])),
    ("driver", "resources", "limits", "cpu"): st.one_of(
        st.integers(-2, 10),
        st.sampled_from(["1Gi", "500m", "1.5", "1Gb", "-1", "+1e3", ".5", "abc", "", "1e"]),
        st.floats(0, 4, allow_nan=False).filter(lambda f: not f.is_integer()),
        _digits_and_units,
    ),
    ("dcgmExporter", "serviceMonitor", "interval"): st.one_of(
        st.sampled_from(["15s", "1m30s", "0", "1h", "15", "1.5s", "", "30ms", "1s1m"]),
        _digits_and_units,
    ),
    ("driver", "image"): st.sampled_from(["driver", "nvcr.io/nvidia/driver", "", "...", "/"]),
    ("hostPaths", "rootFS"): st.sampled_from(["/", "/host", "host", ""]),
    ("driver", "version"): st.sampled_from(["550.54.15", "sha256:abc", ""]),
    ("driver", "usePrecompiled"): st.booleans(),
    ("devicePlugin", "config", "name"): st.sampled_from(["", "plugin-config"]),
    ("devicePlugin", "config", "default"): st.sampled_from(["", "any"]),
    ("driver", "enabled"): st.sampled_from([True, False, "true", 1]),
    ("driver", "unknownField"): st.just("x"),
}

STRICT_DECODING = "strict decoding error"
RULES_NOT_CHECKED = "some validation rules were not checked"


def _cel_messages(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations", []):
            yield rule["message"]
        for value in schema.values():
            yield from _cel_messages(value)


CEL_MESSAGES = set(_cel_messages(object_schema(CLUSTER_POLICY)))

policies = st.fixed_dictionaries({}, optional=FIELDS)


def document(fields: dict[Path, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for path, value in fields.items():
        here = spec
        for key in path[:-1]:
            here = here.setdefault(key, {})
        here[path[-1]] = value
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "generated"},
        "spec": spec,
    }


def named_online(message: str) -> set[str]:
    """The fields the API server's message names (`spec.x.y: ...`, `"spec.x.y"`, or
    `... in spec.x.y` at the end)."""
    return set(re.findall(r'(?:^|[\s\[,"])(spec(?:\.\w+(?:\[\d+\])*)+)(?=[:",\]]|$)', message))


@pytest.fixture
async def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    await install_crds(api_client)
    return client.CustomObjectsApi(api_client)


@settings(
    # The same 60 examples on every CI run (a red run is always reproducible); set
    # HYPOTHESIS_EXPLORE=1 to draw new ones (that is how the int overflows were found).
    derandomize=not os.environ.get("HYPOTHESIS_EXPLORE"),
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(fields=policies)
async def test_validate_and_the_api_server_agree(
    custom: client.CustomObjectsApi, fields: dict[Path, Any]
) -> None:
    policy = document(fields)
    problems = [p for _, p in validate_text(yaml.safe_dump(policy), "generated.yaml").problems]
    try:
        await custom.create_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", copy.deepcopy(policy),
            dry_run="All", field_validation="Strict",
        )  # fmt: skip
        message = ""
    except ApiException as exc:
        assert exc.status in (400, 422), reason(exc)
        message = reason(exc)
    assert bool(message) == bool(problems), (policy["spec"], problems, message)
    if STRICT_DECODING in message:
        # The API server stops at the first stage that fails: unknown fields are refused
        # while decoding, before the schema is looked at. `validate` names both at once.
        problems = [p for p in problems if p.message.startswith("unknown field")]
    elif RULES_NOT_CHECKED in message:
        # Nor are CEL rules run once a value has the wrong type or is not in its enum.
        problems = [p for p in problems if p.message not in CEL_MESSAGES]
    offline = {p.path for p in problems}
    online = named_online(message)
    assert offline == online, (policy["spec"], problems, message)


def _policy(name: str, **fields: Any) -> dict[str, Any]:
    return {**document({}), "metadata": {"name": name}, **fields}


def _env(entries: int) -> dict[str, Any]:
    return {"driver": {"env": [{"name": f"V{i}", "value": "x" * 100} for i in range(entries)]}}


@pytest.mark.parametrize(
    ("policy", "refused"),
    [
        # JSON integers are int64: past it a float (not an integer), past float64 undecodable.
        (_policy("long", spec={"driver": {"upgradePolicy": {"maxUnavailable": 10**399}}}), True),
        (_policy("past", spec={"driver": {"resources": {"limits": {"cpu": 2**63}}}}), True),
        (_policy("status", status={"x": 10**399}), True),
        # A status is dropped, not judged.
        (_policy("dropped", status={"state": "disabled"}), False),
        # etcd stores at most 1.5 MiB an object: 1.47 MiB is stored, 1.65 MiB is not.
        (_policy("large", spec=_env(12000)), False),
        (_policy("larger", spec=_env(13500)), True),
        ({**_policy("case"), "kind": "Clusterpolicy"}, True),
    ],
    ids=["400-digits", "2^63", "in-status", "status", "1.47MiB", "1.65MiB", "kind-case"],
)
async def test_validate_and_the_api_server_agree_on_what_cannot_be_stored(
    custom: client.CustomObjectsApi, policy: dict[str, Any], refused: bool
) -> None:
    """Created for real (a dry run never reaches etcd), then deleted."""
    problems = validate_text(yaml.safe_dump(policy), "policy.yaml").problems
    name = policy["metadata"]["name"]
    try:
        await custom.create_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", copy.deepcopy(policy)
        )
        await custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", name)
        message = ""
    except ApiException as exc:
        assert exc.status in (400, 422, 500), reason(exc)
        message = reason(exc)
    assert bool(message) == refused, message
    assert bool(problems) == refused, problems
