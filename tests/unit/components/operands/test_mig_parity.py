"""The built-in MIG configuration offers every layout the reference's does, on the same GPUs.

An admin who labels a node `nvidia.com/mig.config=all-1g.23gb` after moving from the
reference operator expects the same instances on the same GPU models.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.api.mig_profiles import MIG_GPUS, whole_gpu_config
from components.operands.mig_manager import mig_parted_config

from ..api.cases import COMPAT

pytestmark = pytest.mark.unit

Entry = tuple[frozenset[str] | None, str, bool, frozenset[tuple[str, int]]]


def _reference() -> dict[str, Any]:
    document = yaml.safe_load((COMPAT / "reference-default-mig-parted-config.yaml").read_text())
    configs: dict[str, Any] = yaml.safe_load(document["data"]["config.yaml"])["mig-configs"]
    return configs


def _entries(entries: list[dict[str, Any]]) -> set[Entry]:
    """Entries as comparable values: a lone device ID equals a list of one."""
    out: set[Entry] = set()
    for entry in entries:
        ids = entry.get("device-filter")
        if isinstance(ids, str):
            ids = [ids]
        out.add(
            (
                None if ids is None else frozenset(ids),
                str(entry["devices"]),
                bool(entry["mig-enabled"]),
                frozenset((entry.get("mig-devices") or {}).items()),
            )
        )
    return out


REFERENCE = _reference()


def test_the_reference_has_about_eighty_named_configs() -> None:
    assert len(REFERENCE) > 75


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_every_reference_config_exists_with_the_same_devices_and_profiles(name: str) -> None:
    ours = mig_parted_config()["mig-configs"]
    assert name in ours, f"{name} is missing from the built-in MIG configuration"
    assert _entries(ours[name]) == _entries(REFERENCE[name])


def test_no_config_of_ours_is_unknown_to_the_reference() -> None:
    assert set(mig_parted_config()["mig-configs"]) == set(REFERENCE)


def test_each_gpu_model_appears_once_and_each_device_id_once() -> None:
    ids = [i for gpu in MIG_GPUS for i in gpu.device_ids]
    assert len(ids) == len(set(ids))
    assert len({gpu.name for gpu in MIG_GPUS}) == len(MIG_GPUS)


def test_variant_configs_name_the_plus_as_a_dot() -> None:
    assert whole_gpu_config("1g.10gb") == "all-1g.10gb"
    assert whole_gpu_config("1g.24gb+me.all") == "all-1g.24gb.me.all"
    assert whole_gpu_config("1g.24gb-me") == "all-1g.24gb-me"
