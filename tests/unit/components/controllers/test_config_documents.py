"""The user's ConfigMaps an operand reads are read once per version, off the event loop, and
what cannot be read is a sentence: a deep nesting or a 900 KB flow list neither breaks nor
stalls a reconcile."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from components.controllers._view import ConfigDocuments
from components.operands import ConfigDocument, read_config

pytestmark = pytest.mark.unit

MPS = (
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
)
DEEP = "version: v1\nsharing: " + "[" * 5000 + "]" * 5000 + "\n"
FLOW_900KB = "version: v1\nflags: [" + ", ".join(["1"] * 300_000) + "]\n"


def config_map(name: str, version: str, data: dict[str, str], uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": version}, "data": data}


class Counted:
    """`read_config`, counting what it reads and on which thread."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.threads: set[int] = set()

    def __call__(self, text: str) -> ConfigDocument:
        self.texts.append(text)
        self.threads.add(threading.get_ident())
        return read_config(text)


async def test_a_hostile_config_map_is_read_once_per_version_off_the_event_loop() -> None:
    read = Counted()
    documents = ConfigDocuments(read)
    hostile = config_map("plugin", "7", {"mps": MPS, "deep": DEEP, "flags": FLOW_900KB})

    first = await documents.documents([hostile], {"plugin"})
    assert first["plugin"]["mps"].content["sharing"]["mps"]["resources"][0]["replicas"] == 2
    assert first["plugin"]["deep"].problem is not None
    assert first["plugin"]["deep"].problem.startswith("invalid YAML: nested deeper than 100")
    assert first["plugin"]["flags"].problem == (
        "it is 879 KiB, over the 64 KiB a device-plugin config may be"
    )
    assert sorted(read.texts) == sorted([MPS, DEEP, FLOW_900KB])
    assert threading.get_ident() not in read.threads  # the event loop's thread read nothing

    # The next reconcile, the ConfigMap unchanged: nothing is read again.
    read.texts.clear()
    assert await documents.documents([hostile], {"plugin"}) == first
    assert read.texts == []

    # An edit (a new resourceVersion), or the ConfigMap deleted and made again (a new uid):
    # read again.
    await documents.documents([config_map("plugin", "8", {"mps": MPS})], {"plugin"})
    await documents.documents([config_map("plugin", "8", {"mps": MPS}, uid="u2")], {"plugin"})
    assert read.texts == [MPS, MPS]


async def test_only_the_config_maps_an_operand_reads_are_read_and_kept() -> None:
    read = Counted()
    documents = ConfigDocuments(read)
    plugin = config_map("plugin", "1", {"mps": MPS})
    other = config_map("someone-elses", "1", {"big": FLOW_900KB})

    assert set(await documents.documents([plugin, other], {"plugin"})) == {"plugin"}
    assert read.texts == [MPS]
    # No operand reads it any more (the MPS daemon disabled): it is forgotten, so the
    # cache holds at most the ConfigMaps read now.
    assert await documents.documents([plugin, other], set()) == {}
    await documents.documents([plugin, other], {"plugin"})
    assert read.texts == [MPS, MPS]


def test_what_a_config_cannot_be_is_one_sentence() -> None:
    assert read_config("sharing: [mps").problem == (
        "invalid YAML: did not find expected ',' or ']' (line 2, column 1)"
    )
    assert read_config("a: 1\na: 2\n").problem == (
        "invalid YAML: duplicate key 'a' (line 2, column 1)"
    )
    assert read_config("a: 1\n---\nb: 2\n").problem == (
        "it holds 2 YAML documents where a config is one"
    )
    assert read_config("").content is None
    assert read_config("").problem is None
