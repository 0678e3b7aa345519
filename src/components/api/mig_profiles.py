"""The MIG profile table: every MIG-capable GPU model, its PCI device IDs, the instances of
each MIG profile that fit one GPU, and its `all-balanced` layout.

One table for the whole project: the MIG manager's built-in `default-mig-parted-config`
is generated from it, and the simulator's GPUs cut themselves up by it, so the layouts the
operator offers and the ones the simulated hardware accepts cannot drift apart. Instance
counts follow NVIDIA's MIG user guide; the GPUs covered and their balanced layouts are
those of the reference's default MIG manager config (a unit test holds the two equal).

A GPU offers two kinds of profile. `profiles` are plain compute instances (`1g.10gb`): the
simulator models them. `variants` are the same slices with media engines or graphics
attached or removed (`1g.10gb+me`, `1g.24gb+gfx`, `1g.24gb-me`): offered as whole-GPU
layouts, named with the `+` turned into a dot (`all-1g.10gb.me`), not simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Layout = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class MigGPU:
    """One MIG-capable GPU model: its PCI device IDs and MIG profiles."""

    name: str
    device_ids: tuple[str, ...]
    #: (profile, instances per GPU when the whole GPU is that profile)
    profiles: Layout
    #: the `all-balanced` layout per GPU; empty when the GPU has none
    balanced: Layout = ()
    #: media-engine and graphics variants: (profile, instances per GPU)
    variants: Layout = ()


def whole_gpu_config(profile: str) -> str:
    """The config name that cuts every GPU into `profile`: `all-1g.10gb`, `all-1g.10gb.me`."""
    return "all-" + profile.replace("+", ".")


def _ladder(memory: tuple[int, int, int, int, int], one_g_full: int = 7) -> Layout:
    """The usual profile ladder of a seven-slice GPU from its memory steps in GB.

    `memory` is (1g, 1g-with-double-memory, 3g, 4g, 7g): 2g instances get the double
    memory, 3g and 4g share half the GPU's memory, 7g is the whole GPU.
    """
    small, double, half, four, whole = memory
    return (
        (f"1g.{small}gb", one_g_full),
        (f"1g.{double}gb", 4),
        (f"2g.{double}gb", 3),
        (f"3g.{half}gb", 2),
        (f"4g.{four}gb", 1),
        (f"7g.{whole}gb", 1),
    )


def _balanced(small: int, double: int, half: int) -> Layout:
    return ((f"1g.{small}gb", 2), (f"2g.{double}gb", 1), (f"3g.{half}gb", 1))


def _me(small: int) -> Layout:
    return ((f"1g.{small}gb+me", 1),)


def _seven_slices(
    name: str, device_ids: tuple[str, ...], memory: tuple[int, int, int, int, int]
) -> MigGPU:
    """A GPU with the usual ladder (`_ladder`), whose `all-balanced` layout and `+me`
    variant are cut from the ladder's own 1g, 2g and 3g sizes: one row of facts a model."""
    small, double, half, _, _ = memory
    return MigGPU(name, device_ids, _ladder(memory), _balanced(small, double, half), _me(small))


MIG_GPUS: Sequence[MigGPU] = (
    MigGPU(
        "A30-24GB",
        ("0x20B710DE",),
        (("1g.6gb", 4), ("2g.12gb", 2), ("4g.24gb", 1)),
        (("1g.6gb", 2), ("2g.12gb", 1)),
        (("1g.6gb+me", 1), ("2g.12gb+me", 1)),
    ),
    _seven_slices(
        "A100-40GB", ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"), (5, 10, 20, 20, 40)
    ),
    _seven_slices(
        "A100-80GB", ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"), (10, 20, 40, 40, 80)
    ),
    _seven_slices(
        "H100-80GB", ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"), (10, 20, 40, 40, 80)
    ),
    _seven_slices("H100-94GB-NVL", ("0x232110DE", "0x233A10DE"), (12, 24, 47, 47, 94)),
    # H100-96GB, PG506-96GB, GH200 96GB and H20
    _seven_slices(
        "H100-96GB", ("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"), (12, 24, 48, 48, 96)
    ),
    _seven_slices("H200-141GB", ("0x233510DE",), (18, 35, 71, 71, 141)),
    MigGPU(
        # The reference's default config offers no `all-1g.35gb` on the H200 NVL.
        "H200-141GB-NVL",
        ("0x233B10DE",),
        tuple(p for p in _ladder((18, 35, 71, 71, 141)) if p[0] != "1g.35gb"),
        _balanced(18, 35, 71),
        _me(18),
    ),
    _seven_slices("GH200-144GB", ("0x234810DE",), (18, 36, 72, 72, 144)),
    _seven_slices("B200-180GB", ("0x290110DE",), (23, 45, 90, 90, 180)),
    _seven_slices("GB200-186GB", ("0x294110DE",), (23, 47, 93, 93, 186)),
    MigGPU(
        # A GB200 with 189 GB: its whole-GPU layouts only; no balanced layout filters on it.
        "GB200-189GB",
        (),
        (("3g.95gb", 2), ("4g.95gb", 1), ("7g.189gb", 1)),
    ),
    _seven_slices("B300-269GB", ("0x318210DE",), (34, 67, 135, 135, 269)),
    _seven_slices("GB300-278GB", ("0x31C210DE",), (35, 70, 139, 139, 278)),
    MigGPU(
        "RTX-PRO-6000-96GB",
        ("0x2BB510DE",),
        (("1g.24gb", 4), ("2g.48gb", 2), ("4g.96gb", 1)),
        (("1g.24gb", 2), ("2g.48gb", 1)),
        (
            ("1g.24gb+gfx", 4),
            ("1g.24gb+me", 1),
            ("1g.24gb+me.all", 1),
            ("1g.24gb-me", 4),
            ("2g.48gb+gfx", 2),
            ("2g.48gb+me.all", 1),
            ("2g.48gb-me", 2),
            ("4g.96gb+gfx", 1),
        ),
    ),
)
