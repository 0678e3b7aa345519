"""NVIDIADriver node pools: which GPU nodes each NVIDIADriver serves. Pure functions.

Each NVIDIADriver selects GPU nodes with its `nodeSelector` (an empty one selects every
GPU node); the one with `default: true` takes the GPU nodes no other one selects. When two
would serve the same node, the older one keeps it and the younger one gets a condition and
deploys nothing: a node never runs two drivers, and the two never take turns. Likewise
only the oldest `default: true` one is the default.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.api import (
    GPU_PRESENT_LABEL,
    names_and_more,
)
from reconciler import Object, labels_of, name_of

CONFLICTING_NODE_SELECTOR = "ConflictingNodeSelector"
MULTIPLE_DEFAULTS = "MultipleDefaults"
TOO_MANY_POOLS = "TooManyNodePools"

MAX_AFFINITY_TERMS = 64
"""The default pool's node affinity is the complement of every other pool's selector; past
this many terms it is not written out (and the default driver says why)."""

_NAMED = 5


@dataclass(frozen=True)
class Pool:
    """One NVIDIADriver's share of the GPU nodes."""

    name: str
    default: bool
    selector: Mapping[str, str]
    nodes: tuple[str, ...]
    exclude: tuple[Mapping[str, str], ...] = ()
    """For the default pool: the other pools' selectors, whose nodes it must not take."""


@dataclass
class Pools:
    pools: dict[str, Pool] = field(default_factory=dict)
    conflicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    """NVIDIADriver name -> (reason, message) for the ones that deploy nothing."""


def spec_of(obj: Object) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def selector_of(obj: Object) -> dict[str, str]:
    """The node selector to deploy with (every GPU node when none is given)."""
    selector = spec_of(obj).get("nodeSelector") or {}
    return {str(k): str(v) for k, v in selector.items()} or {GPU_PRESENT_LABEL: "true"}


def is_default(obj: Object) -> bool:
    return spec_of(obj).get("default") is True


def matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def assign(drivers: Sequence[Object], gpu_nodes: Sequence[Object]) -> Pools:
    """Pools for `drivers` (oldest first) over `gpu_nodes`."""
    out = Pools()
    taken: dict[str, str] = {}  # node -> NVIDIADriver serving it
    selectors: list[dict[str, str]] = []
    default: Object | None = None
    for obj in drivers:
        name = name_of(obj)
        if is_default(obj):
            if default is None:
                default = obj
            else:
                out.conflicts[name] = (
                    MULTIPLE_DEFAULTS,
                    f"NVIDIADriver {name_of(default)} is already the default (the oldest one "
                    "with default: true); this one deploys nothing",
                )
            continue
        selector = selector_of(obj)
        nodes = sorted(name_of(n) for n in gpu_nodes if matches(selector, labels_of(n)))
        clashes = [n for n in nodes if n in taken]
        if clashes:
            owners = sorted({taken[n] for n in clashes})
            out.conflicts[name] = (
                CONFLICTING_NODE_SELECTOR,
                f"its nodeSelector selects nodes {names_and_more(clashes, _NAMED)}, already "
                f"served by NVIDIADriver {', '.join(owners)}; this one deploys nothing until the "
                "selectors no longer overlap",
            )
            continue
        taken.update(dict.fromkeys(nodes, name))
        selectors.append(selector)
        out.pools[name] = Pool(name, False, selector, tuple(nodes))
    if default is not None:
        rest = sorted(name_of(n) for n in gpu_nodes if name_of(n) not in taken)
        name = name_of(default)
        out.pools[name] = Pool(name, True, {}, tuple(rest), exclude=tuple(selectors))
    return out


def exclusion_terms(exclude: Sequence[Mapping[str, str]]) -> list[dict[str, Any]] | None:
    """`nodeSelectorTerms` admitting exactly the nodes no selector in `exclude` matches.

    Not matching {a: 1, b: 2} means `a NotIn [1]` or `b NotIn [2]`; not matching any of
    several selectors is the product of those choices (terms are ORed, expressions in a
    term ANDed). None when there are more than `MAX_AFFINITY_TERMS` terms.
    """
    if not exclude:
        return []
    choices = [
        [{"key": k, "operator": "NotIn", "values": [v]} for k, v in sorted(sel.items())]
        for sel in exclude
    ]
    count = 1
    for options in choices:
        count *= len(options)
    if count > MAX_AFFINITY_TERMS:
        return None
    return [{"matchExpressions": list(combo)} for combo in itertools.product(*choices)]
