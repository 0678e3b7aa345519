"""Errors of the test control plane, each one sentence a developer can act on."""

from __future__ import annotations


class ControlPlaneError(RuntimeError):
    """The control plane could not be started or used; the message says what to do."""


class BinaryMissingError(ControlPlaneError):
    """A control-plane binary is not in the cache."""
