"""The NVIDIA GPU stack: the ClusterPolicy API, one module per operand, and the CLI."""

__version__ = "0.1.0"
