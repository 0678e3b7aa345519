"""The controllers that keep the GPU stack on every GPU node, and the operator that runs them.

* `NodeLabelController`: `nvidia.com/gpu.present`, `nvidia.com/gpu.deploy.*` and the
  driver auto-upgrade annotation on nodes;
* `ClusterPolicyController`: every operand from the oldest ClusterPolicy, its status,
  Events and `gpu_operator_*` metrics;
* `NVIDIADriverController`: driver DaemonSets per node pool from NVIDIADriver resources;
* `MigClearingController`: a node's GPU pods evicted (PodDisruptionBudgets honoured, an
  Event for each) while its MIG change is pending, and what blocks it reported.
* `ReplacedDaemonSetPods` (`_orphans`): the pods a DaemonSet deleted and created again
  under its name left behind, deleted (the garbage collector can miss them).

Run them all in-process (tests, `gpu-operator run`)::

    operator = build_operator(api_client, namespace="gpu-operator", bind_address=None)
    task = asyncio.create_task(operator.manager.run())
    await operator.manager.wait_leading()
    ...
    operator.manager.stop()
    await task
"""

from components.controllers._constants import (
    DEFAULT_NAMESPACE,
    FIELD_MANAGER,
    HASH_ANNOTATION,
    LEASE_NAME,
)
from components.controllers._label_wait import LabelWait, nodes_awaiting_labels
from components.controllers._labels import (
    LabelPolicy,
    annotation_patch,
    has_gpu,
    host_driver,
    node_label_patch,
)
from components.controllers._node_labels import NodeLabelController
from components.controllers._nvidiadriver import NVIDIADriverController
from components.controllers._operator import Operator, build_operator, setup_operator
from components.controllers._pools import Pool, Pools, assign, exclusion_terms
from components.controllers._status import Findings, OperandReadiness, policy_status
from components.controllers.clusterpolicy import ClusterPolicyController

__all__ = [
    "DEFAULT_NAMESPACE",
    "FIELD_MANAGER",
    "HASH_ANNOTATION",
    "LEASE_NAME",
    "ClusterPolicyController",
    "Findings",
    "LabelPolicy",
    "LabelWait",
    "NVIDIADriverController",
    "NodeLabelController",
    "OperandReadiness",
    "Operator",
    "Pool",
    "Pools",
    "annotation_patch",
    "assign",
    "build_operator",
    "exclusion_terms",
    "has_gpu",
    "host_driver",
    "node_label_patch",
    "nodes_awaiting_labels",
    "policy_status",
    "setup_operator",
]
