"""The ClusterPolicy controller: from the oldest ClusterPolicy, the whole GPU stack.

The reconcile (`_controller`) reads top to bottom: parse the policy, render every enabled
operand into one immutable plan (`_operands.Plan`, readiness rules included), apply it,
prune what it no longer wants, then judge readiness and write the status. Where the driver
DaemonSets come from (the policy, or NVIDIADriver resources) is one strategy object
(`_driver.DriverPlacement`), not a case in each step. Its watches (`_events`) only map
events to requests.
"""

from components.controllers.clusterpolicy._controller import NAME, ClusterPolicyController
from components.controllers.clusterpolicy._operands import Plan
from components.controllers.clusterpolicy._preview import PolicyPreview, Preview

__all__ = [
    "NAME",
    "ClusterPolicyController",
    "Plan",
    "PolicyPreview",
    "Preview",
]
