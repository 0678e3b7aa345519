"""Types shared by both kinds: Kubernetes pieces (env, resources, tolerations, object
metadata) and the image fields every operand section carries."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from components.api._base import ApiModel, Format, IntOrString, Preserved

#: Kubernetes' quantity syntax (`500m`, `1Gi`, `2`), as in every built-in schema.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: The reference's (unanchored) pattern for image names: at least one name character.
IMAGE_NAME_PATTERN = r"[a-zA-Z0-9\-]+"

Quantity = Annotated[int | str, IntOrString(pattern=QUANTITY_PATTERN)]
StringMap = dict[str, str]
Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]


class EnvVar(ApiModel):
    """An environment variable for an operand's container."""

    name: str = Field(description="Name of the environment variable.")
    value: str = Field(default="", description="Value of the environment variable.")


class ResourceRequirements(ApiModel):
    """Compute resources for an operand's containers."""

    limits: dict[str, Quantity] = Field(
        default_factory=dict, description="The most compute resources allowed."
    )
    requests: dict[str, Quantity] = Field(
        default_factory=dict, description="The compute resources asked for."
    )


class Toleration(ApiModel):
    """A toleration, as in a pod spec."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: Int64 | None = None


class ObjectMeta(ApiModel):
    """The object metadata fields the operator reads; every other key is kept as given."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: StringMap = Field(default_factory=dict)
    annotations: StringMap = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)


class ImageSpec(ApiModel):
    """Where an image comes from: `repository/image:version` (`@version` for a digest)."""

    repository: str = Field(default="", description="Image repository, e.g. nvcr.io/nvidia.")
    image: str = Field(default="", pattern=IMAGE_NAME_PATTERN, description="Image name.")
    version: str = Field(default="", description="Image tag, or a sha256: digest.")
    image_pull_policy: str = Field(default="", description="Image pull policy.")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Image pull secrets.")


class ComponentSpec(ImageSpec):
    """The fields every operand section shares (image, resources, args, env)."""

    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="Resource requests and limits for the operand's pods.",
    )
    args: list[str] = Field(default_factory=list, description="Extra container arguments.")
    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")


class OperandSpec(ComponentSpec):
    """An operand section of the ClusterPolicy: the shared fields and `hostNetwork`."""

    host_network: bool = Field(
        default=False, description="Run the operand's pods in the host's network namespace."
    )


class DriverManagerSpec(ImageSpec):
    """The k8s-driver-manager init container of the driver pods."""

    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")


class ContainerProbeSpec(ApiModel):
    """Probe settings for the driver container; unset fields keep the operator's defaults."""

    initial_delay_seconds: Int32 | None = None
    timeout_seconds: Int32 | None = Field(default=None, ge=1)
    period_seconds: Int32 | None = Field(default=None, ge=1)
    success_threshold: Int32 | None = Field(default=None, ge=1)
    failure_threshold: Int32 | None = Field(default=None, ge=1)


class GPUDirectRDMASpec(ApiModel):
    """GPUDirect RDMA (nvidia-peermem)."""

    enabled: bool = False
    use_host_mofed: bool = False


class NameRef(ApiModel):
    """A reference to a ConfigMap by name."""

    name: str = ""


def preserved() -> Any:
    """A kept-as-given section (defaults to empty)."""
    return Field(default_factory=dict)


__all__ = [
    "IMAGE_NAME_PATTERN",
    "QUANTITY_PATTERN",
    "ComponentSpec",
    "ContainerProbeSpec",
    "DriverManagerSpec",
    "EnvVar",
    "GPUDirectRDMASpec",
    "ImageSpec",
    "Int32",
    "Int64",
    "NameRef",
    "ObjectMeta",
    "OperandSpec",
    "Preserved",
    "Quantity",
    "ResourceRequirements",
    "StringMap",
    "Toleration",
    "preserved",
]
