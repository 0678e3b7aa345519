"""The MIG profile table: every MIG-capable GPU model, its PCI device IDs, the instances of
each MIG profile that fit one GPU, and its `all-balanced` layout.

One table for the whole project: the MIG manager's built-in `default-mig-parted-config`
is generated from it, and the simulator's GPUs cut themselves up by it, so the layouts the
operator offers and the ones the simulated hardware accepts cannot drift apart. Instance
counts follow NVIDIA's MIG user guide; the balanced layouts, the MIG manager's default
config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MigGPU:
    """One MIG-capable GPU model: its PCI device IDs and MIG profiles."""

    name: str
    device_ids: tuple[str, ...]
    #: (profile, instances per GPU when the whole GPU is that profile)
    profiles: tuple[tuple[str, int], ...]
    #: the `all-balanced` layout per GPU
    balanced: tuple[tuple[str, int], ...]


_A100_H100_80GB_PROFILES = (
    ("1g.10gb", 7),
    ("1g.20gb", 4),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
)
_A100_H100_80GB_BALANCED = (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))

MIG_GPUS: Sequence[MigGPU] = (
    MigGPU(
        "A30-24GB",
        ("0x20B710DE",),
        (("1g.6gb", 4), ("2g.12gb", 2), ("4g.24gb", 1)),
        (("1g.6gb", 2), ("2g.12gb", 1)),
    ),
    MigGPU(
        "A100-40GB",
        ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
        (("1g.5gb", 7), ("2g.10gb", 3), ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1)),
        (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
    ),
    MigGPU(
        "A100-80GB",
        ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
        _A100_H100_80GB_PROFILES,
        _A100_H100_80GB_BALANCED,
    ),
    MigGPU(
        "H100-80GB",
        ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
        _A100_H100_80GB_PROFILES,
        _A100_H100_80GB_BALANCED,
    ),
    MigGPU(
        "H200-141GB",
        ("0x233510DE", "0x233B10DE"),
        (
            ("1g.18gb", 7),
            ("1g.35gb", 4),
            ("2g.35gb", 3),
            ("3g.71gb", 2),
            ("4g.71gb", 1),
            ("7g.141gb", 1),
        ),
        (("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)),
    ),
)
