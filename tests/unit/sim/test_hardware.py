"""GPU products and MIG tables match NVIDIA's MIG user guide and MIG manager configs."""

from __future__ import annotations

import pytest

from gpusim import (
    MIG_BALANCED,
    MIG_PROFILES,
    PRODUCTS,
    MigConfigError,
    SimError,
    mig_layout,
    product,
)

pytestmark = pytest.mark.unit


def _table(family: str) -> dict[str, int]:
    return {p.name: p.per_gpu for p in MIG_PROFILES[family]}


def test_mig_profiles_per_gpu_from_the_user_guide() -> None:
    assert _table("A30-24GB") == {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}
    assert _table("A100-40GB") == {
        "1g.5gb": 7,
        "1g.10gb": 4,
        "2g.10gb": 3,
        "3g.20gb": 2,
        "4g.20gb": 1,
        "7g.40gb": 1,
    }
    expected_80 = {
        "1g.10gb": 7,
        "1g.20gb": 4,
        "2g.20gb": 3,
        "3g.40gb": 2,
        "4g.40gb": 1,
        "7g.80gb": 1,
    }
    assert _table("A100-80GB") == expected_80
    assert _table("H100-80GB") == expected_80
    assert _table("H200-141GB") == {
        "1g.18gb": 7,
        "1g.35gb": 4,
        "2g.35gb": 3,
        "3g.71gb": 2,
        "4g.71gb": 1,
        "7g.141gb": 1,
    }


def test_profiles_fit_seven_compute_slices_and_balanced_uses_known_profiles() -> None:
    for product_ in PRODUCTS.values():
        if product_.mig_family is None:
            continue
        for profile in MIG_PROFILES[product_.mig_family]:
            assert profile.slices * profile.per_gpu <= 7 or profile.slices == 4
        balanced = MIG_BALANCED[product_.mig_family]
        assert set(balanced) <= {p.name for p in MIG_PROFILES[product_.mig_family]}


def test_profile_memory_and_slices() -> None:
    one = MIG_PROFILES["H100-80GB"][0]
    assert (one.name, one.slices, one.memory_mib) == ("1g.10gb", 1, 10240)


def test_mig_layouts_for_config_names() -> None:
    h100 = PRODUCTS["NVIDIA-H100-80GB-HBM3"]
    a100 = PRODUCTS["NVIDIA-A100-SXM4-40GB"]
    assert mig_layout(a100, "all-1g.5gb") == {"1g.5gb": 7}
    assert mig_layout(h100, "all-1g.10gb") == {"1g.10gb": 7}
    assert mig_layout(h100, "all-3g.40gb") == {"3g.40gb": 2}
    assert mig_layout(h100, "all-balanced") == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert mig_layout(h100, "all-disabled") == {}
    assert mig_layout(h100, "all-enabled") == {}


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("NVIDIA-H100-80GB-HBM3", "all-1g.5gb"),  # an A100-40GB profile
        ("NVIDIA-H100-80GB-HBM3", "custom-layout"),
        ("NVIDIA-H100-80GB-HBM3", "1g.10gb"),
        ("NVIDIA-L4", "all-1g.10gb"),  # no MIG at all
    ],
)
def test_configs_a_gpu_cannot_apply(name: str, config: str) -> None:
    with pytest.raises(MigConfigError):
        mig_layout(PRODUCTS[name], config)


def test_non_mig_gpu_accepts_all_disabled() -> None:
    assert mig_layout(PRODUCTS["NVIDIA-L4"], "all-disabled") == {}


def test_unknown_product_lists_the_known_ones() -> None:
    with pytest.raises(SimError, match="unknown GPU product 'RTX-9090'; choose one of NVIDIA-H100"):
        product("RTX-9090")


def test_simulated_gpus_accept_exactly_the_layouts_the_mig_manager_offers() -> None:
    from components.operands.mig_manager import mig_parted_config

    offered = mig_parted_config()["mig-configs"]
    for gpu in (p for p in PRODUCTS.values() if p.mig_family is not None):
        accepted = set()
        for config in offered:
            try:
                mig_layout(gpu, config)
            except MigConfigError:
                continue
            accepted.add(config)
        profiles = {f"all-{p.name}" for p in MIG_PROFILES[gpu.mig_family]}
        assert accepted == {"all-disabled", "all-enabled", "all-balanced"} | profiles
