"""The names of NVIDIA's DRA stack the simulated cluster reads: the kubelet plugin pod's
`app` label and ServiceAccount (the GPU node behaviour writes the node's ResourceSlice as
that account, `gpusim._dra`), its deploy label, the validator pods' `app`, the ResourceSlice
admission policy's name and the driver's name. The objects themselves are the operator's
(its GPUCluster controller renders them); the e2e tests and `bench/scale.py --dra` use
those, so the simulator keeps no copy of its own.
"""

from __future__ import annotations

NAMESPACE = "gpu-operator"
PLUGIN_ACCOUNT = "nvidia-dra-driver-kubeletplugin"
PLUGIN_APP = "nvidia-dra-driver-kubelet-plugin"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"
VALIDATOR_APP = "nvidia-operator-validator"
POLICY = "resourceslices-policy-nvidia-dra-driver"
DRIVER = "gpu.nvidia.com"
