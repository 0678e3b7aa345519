"""Errors of the simulated cluster, each one sentence a user can act on."""

from __future__ import annotations


class SimError(RuntimeError):
    """The simulated cluster could not be started, stopped or changed; the message says why."""


class SimAlreadyRunningError(SimError):
    """A simulated cluster already runs from the same state directory."""
