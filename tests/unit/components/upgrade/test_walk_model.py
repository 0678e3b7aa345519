"""The whole walk, as a model: the pure planner and admission against a small world.

Hypothesis picks, step by step, who acts next: a node reconcile, an admission, or the
world (a terminating pod goes, the DaemonSet recreates a deleted driver pod, a pod gets
ready, a deleted GPU pod's ReplicaSet puts it back on some schedulable node). Writes go
through the same JSON patches the controller sends. After every single action:

* at most maxParallelUpgrades nodes are in progress, even when admission decides from a
  lagging cache (one that shows its own earlier admissions, nothing more recent),
* at most maxUnavailable nodes are unavailable (plus any cordoned before we started),
* no GPU pod is on a node whose driver pod is terminating, missing, or not yet ready;

and once everyone has had a fair share of turns, every node is upgraded, done, cordoned
exactly if it was cordoned before, and runs its device plugin and validator again.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.api import UpgradeState
from components.upgrade import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    IN_PROGRESS,
    STATE_LABEL,
    VALIDATOR_DEPLOY_LABEL,
    NodeContext,
    PodView,
    Transition,
    admit,
    fold,
    max_unavailable,
    node_view,
    patched,
    plan_node,
    transition_patch,
)

from .builders import NS, policy

S = UpgradeState
VALIDATOR = VALIDATOR_DEPLOY_LABEL


def apply_json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> bool:
    """Apply like the API server would: all or nothing; False when a `test` fails."""
    after = patched(obj, ops)
    if after is None:
        return False
    obj.clear()
    obj.update(after)
    return True


@dataclass
class Pod:
    name: str
    node: str
    kind: str  # driver | validator | gpu
    revision: str = ""
    created: float = 0.0
    ready: bool = False
    terminating: bool = False

    def view(self) -> PodView:
        if self.kind == "driver":
            return PodView(
                namespace=NS,
                name=self.name,
                uid=self.name,
                node=self.node,
                labels={"app": "nvidia-driver-daemonset"},
                ready=self.ready,
                terminating=self.terminating,
                created=self.created,
                owner_kind="DaemonSet",
                owner_name="driver",
                revision=self.revision,
                kernel="k1",
                kernel_recorded=True,
            )
        if self.kind == "validator":
            return PodView(
                namespace=NS,
                name=self.name,
                uid=self.name,
                node=self.node,
                labels={"app": "nvidia-operator-validator"},
                ready=self.ready,
                terminating=self.terminating,
                created=self.created,
                owner_kind="DaemonSet",
                owner_name="validator",
            )
        return PodView(
            namespace="work",
            name=self.name,
            uid=self.name,
            node=self.node,
            labels={"app": "train"},
            ready=self.ready,
            terminating=self.terminating,
            created=self.created,
            gpu=True,
            owner_kind="ReplicaSet",
            owner_name="train",
        )


@dataclass
class World:
    nodes: dict[str, dict[str, Any]]
    pods: list[Pod]
    now: float = 1_000_000.0
    ids: itertools.count[int] = field(default_factory=itertools.count)

    def node_pods(self, name: str) -> list[Pod]:
        return [p for p in self.pods if p.node == name]

    def driver(self, name: str) -> Pod | None:
        drivers = [p for p in self.node_pods(name) if p.kind == "driver"]
        live = [p for p in drivers if not p.terminating]
        return (live or drivers or [None])[-1]

    def new(self, kind: str, node: str, **kw: Any) -> Pod:
        pod = Pod(f"{kind}-{next(self.ids)}", node, kind, created=self.now, **kw)
        self.pods.append(pod)
        return pod


def make_world(size: int, gpu_pods: int, cordoned: set[int], not_ready: set[int]) -> World:
    nodes = {}
    for i in range(size):
        name = f"n{i}"
        nodes[name] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                         "feature.node.kubernetes.io/kernel-version.full": "k1",
                         DEVICE_PLUGIN_DEPLOY_LABEL: "true", VALIDATOR: "true"},
                         "resourceVersion": "1"},
            "spec": {"unschedulable": True} if i in cordoned else {},
            "status": {"conditions": [
                {"type": "Ready", "status": "False" if i in not_ready else "True"}]},
        }  # fmt: skip
    world = World(nodes, [])
    for name in nodes:
        world.new("driver", name, revision="old", ready=True)
        world.new("validator", name, ready=True)
    for j in range(gpu_pods):
        world.new("gpu", f"n{j % size}", ready=True)
    world.now += 100
    return world


class Run:
    def __init__(self, world: World, parallel: int, unavailable: int | str) -> None:
        self.world = world
        self.policy = policy(
            maxParallelUpgrades=parallel,
            maxUnavailable=unavailable,
            podDeletion={"timeoutSeconds": 0},
            drain={"enable": True, "timeoutSeconds": 0},
        )
        self.initially_cordoned = {
            n for n, o in world.nodes.items() if o["spec"].get("unschedulable")
        }
        self.initially_unavailable = sum(
            1 for n in world.nodes.values() if node_view(n).unavailable
        )
        self.cap = max_unavailable(self.policy, len(world.nodes))
        self.history: dict[str, list[dict[str, Any]]] = {
            n: [copy.deepcopy(o)] for n, o in world.nodes.items()
        }
        self.admitted: dict[str, int] = {}

    # -- the operator --------------------------------------------------------------------

    def write(self, name: str, t: Transition, then: Any = None) -> None:
        """`t`, and with `then` (a planner) the transitions the controller folds into the
        same patch after it."""
        obj = self.world.nodes[name]
        if then is None:
            ops = transition_patch(node_view(obj), t, self.world.now)
        else:
            ops = fold(obj, node_view(obj), t, then, self.world.now).ops
        if ops:
            assert apply_json_patch(obj, ops), f"a patch from a fresh view failed: {ops}"
            self.history.setdefault(name, []).append(copy.deepcopy(obj))

    def stale_admission(self, rng: int) -> None:
        """Admission from a cache that lags: each node as some past version of it, never
        older than the last admission wrote (what `WriteTracker` guarantees). Its writes
        compare-and-set against what it saw, as the controller's do."""
        views = []
        for i, (name, obj) in enumerate(sorted(self.world.nodes.items())):
            past = self.history.setdefault(name, [copy.deepcopy(obj)])
            first = self.admitted.get(name, 0)
            views.append(node_view(past[first + (rng + i) % (len(past) - first)]))
        for view in views:
            if view.name not in admit(views, self.policy):
                continue
            obj = self.world.nodes[view.name]
            ops = transition_patch(view, Transition(S.CORDON_REQUIRED, "admitted"), self.world.now)
            if ops and apply_json_patch(obj, ops):
                self.history[view.name].append(copy.deepcopy(obj))
                self.admitted[view.name] = len(self.history[view.name]) - 1

    def reconcile(self, name: str) -> None:
        w = self.world
        obj = w.nodes[name]
        driver = w.driver(name)
        ctx = NodeContext(
            node=node_view(obj),
            driver=driver.view() if driver else None,
            target_revision="new",
            pods=[p.view() for p in w.node_pods(name)],
        )
        step = plan_node(ctx, self.policy, w.now)
        gone = {p.name for p in (*step.delete, *step.evict)}
        for pod in w.pods:
            if pod.name in gone:
                pod.terminating = True
                pod.ready = False
        if step.transition is not None:
            # As the controller: a transition with pods going is written alone; one without
            # takes the transitions after it that need nothing else in the same patch.
            then = (
                None
                if gone
                else lambda view: plan_node(replace(ctx, node=view), self.policy, w.now)
            )
            self.write(name, step.transition, then)

    def admission(self) -> None:
        views = [node_view(o) for o in self.world.nodes.values()]
        for name in admit(views, self.policy):
            self.write(name, Transition(S.CORDON_REQUIRED, "admitted"))
            self.admitted[name] = len(self.history[name]) - 1

    # -- the world -----------------------------------------------------------------------

    def world_step(self, choice: int) -> None:
        w = self.world
        w.now += 1
        terminating = [p for p in w.pods if p.terminating]
        if choice == 0 and terminating:
            pod = terminating[0]
            w.pods.remove(pod)
            if pod.kind == "gpu":
                # Its ReplicaSet puts it back where the scheduler may: a schedulable node
                # whose driver runs (the device plugin only advertises GPUs then).
                for name, o in sorted(w.nodes.items()):
                    d = w.driver(name)
                    if not o["spec"].get("unschedulable") and d and d.ready and not d.terminating:
                        w.new("gpu", name, ready=True)
                        break
            return
        for name, o in w.nodes.items():
            pods = [p for p in w.node_pods(name) if not p.terminating]
            if "driver" not in {p.kind for p in pods}:
                w.new("driver", name, revision="new")  # the DaemonSet recreates it
                return
            # The validator's DaemonSet runs it where its deploy label is `true` only.
            validators = [p for p in pods if p.kind == "validator"]
            wanted = o["metadata"]["labels"].get(VALIDATOR) == "true"
            if validators and not wanted:
                validators[0].terminating = True
                validators[0].ready = False
                return
            if wanted and not validators:
                w.new("validator", name)
                return
        not_ready = [p for p in w.pods if not p.ready and not p.terminating]
        if not_ready:
            not_ready[choice % len(not_ready)].ready = True

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        views = [node_view(o) for o in self.world.nodes.values()]
        in_progress = sum(1 for v in views if v.state in IN_PROGRESS)
        if self.policy.max_parallel_upgrades:
            assert in_progress <= self.policy.max_parallel_upgrades
        unavailable = sum(1 for v in views if v.unavailable or v.state is S.CORDON_REQUIRED)
        assert unavailable <= max(self.cap, self.initially_unavailable)
        for name in self.world.nodes:
            d = self.world.driver(name)
            gpu = [p for p in self.world.node_pods(name) if p.kind == "gpu"]
            if d is None or d.terminating or (d.revision == "new" and not d.ready):
                assert not gpu, f"GPU pods {gpu} on {name} while its driver is replaced"

    def finished(self) -> bool:
        for name, o in self.world.nodes.items():
            d = self.world.driver(name)
            labels = o["metadata"]["labels"]
            if labels.get(STATE_LABEL) != S.UPGRADE_DONE.value:
                return False
            # The walk's pauses are all resumed.
            if labels[DEVICE_PLUGIN_DEPLOY_LABEL] != "true" or labels[VALIDATOR] != "true":
                return False
            if d is None or d.revision != "new":
                return False
        return True


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, int, set[int], set[int], int, int | str]:
    size = draw(st.integers(min_value=1, max_value=7))
    gpu_pods = draw(st.integers(min_value=0, max_value=10))
    cordoned = set(draw(st.lists(st.integers(0, size - 1), max_size=2)))
    not_ready = set(draw(st.lists(st.integers(0, size - 1), max_size=1)))
    parallel = draw(st.integers(min_value=0, max_value=3))
    unavailable: int | str = draw(
        st.integers(min_value=1, max_value=4) | st.sampled_from(["25%", "50%", "100%"])
    )
    return size, gpu_pods, cordoned, not_ready, parallel, unavailable


@settings(max_examples=120, deadline=None)
@given(scenarios(), st.data())
def test_random_interleavings_keep_the_limits_and_finish(
    scenario: tuple[int, int, set[int], set[int], int, int | str], data: st.DataObject
) -> None:
    size, gpu_pods, cordoned, not_ready, parallel, unavailable = scenario
    run = Run(make_world(size, gpu_pods, cordoned, not_ready), parallel, unavailable)
    names = sorted(run.world.nodes)
    # The DaemonSet's template changes: every driver pod is now outdated.
    for _ in range(data.draw(st.integers(min_value=0, max_value=300), label="random steps")):
        actor = data.draw(st.integers(min_value=0, max_value=size + 2))
        if actor < size:
            run.reconcile(names[actor])
        elif actor == size:
            run.admission()
        elif actor == size + 1:
            run.stale_admission(data.draw(st.integers(min_value=0, max_value=50)))
        else:
            run.world_step(data.draw(st.integers(min_value=0, max_value=3)))
        run.check()
    # Then a fair scheduler: everyone acts in turn until nothing is left to do. NotReady
    # nodes heal (a node that stays NotReady holds its share of maxUnavailable for good).
    for o in run.world.nodes.values():
        o["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    for _ in range(60 * size + 100):
        if run.finished():
            break
        for name in names:
            run.reconcile(name)
            run.check()
        run.admission()
        run.check()
        for choice in range(4):
            run.world_step(choice)
            run.check()
    states = {n: o["metadata"]["labels"].get(STATE_LABEL) for n, o in run.world.nodes.items()}
    if len(cordoned) < run.cap or len(cordoned) == size:
        assert run.finished(), states
    else:
        # Nodes cordoned by someone else use up maxUnavailable (they stay cordoned, as they
        # were): the others wait for a budget that never comes, and are never cordoned.
        for name, state in states.items():
            assert state == S.UPGRADE_DONE.value or (
                state == S.UPGRADE_REQUIRED.value and name not in run.initially_cordoned
            ), states
    for name, o in run.world.nodes.items():
        assert bool(o["spec"].get("unschedulable")) == (name in run.initially_cordoned)
