"""`gpu-operator plan`: what applying a ClusterPolicy would do, before it is applied.

Read-only against the live cluster: the objects the operator would create, change (which
fields) or delete, rendered by the ClusterPolicy controller's own code
(`components.controllers.clusterpolicy.PolicyPreview`) and compared as its server-side
apply would find them (a dry run); then which nodes would restart their driver in place,
which would be walked, in what rounds, and which pre-flight would hold::

    plan = await plan_policy(api_client, document, namespace="gpu-operator")
    plan.changes, plan.objects, plan.nodes.rounds, plan.to_dict()
"""

from components.plan._nodes import NodePlan
from components.plan._objects import ObjectChange
from components.plan._plan import PolicyPlan, plan_policy

__all__ = ["NodePlan", "ObjectChange", "PolicyPlan", "plan_policy"]
