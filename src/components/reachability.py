"""Say at once, and why, when the operator cannot talk to its API server.

The informers retry an unreachable server quietly (a blip must not flood the logs), so a
wrong address, a firewall or a bad token used to show nothing until the cache-sync timeout.
This probe asks the server for its version at start and then now and again, logs a WARNING
with the cause while that fails, and one INFO line when it answers again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from reconciler.errors import ApiError, ApiUnreachable
from reconciler.lowlevel import Transport

log = logging.getLogger("components.reachability")

TIMEOUT_SECONDS = 5.0
WHILE_DOWN_SECONDS = 10.0
WHILE_UP_SECONDS = 60.0


def cause(exc: BaseException) -> str:
    """One line a person can act on."""
    if isinstance(exc, ApiError):
        return f"HTTP {exc.status} {exc.reason}".strip()
    if isinstance(exc, ApiUnreachable) and isinstance(exc.__cause__, BaseException):
        exc = exc.__cause__
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS:.0f}s"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


async def watch(api: Any) -> None:
    """Probe until cancelled."""
    transport = Transport(api, user_agent="gpu-operator", request_timeout=TIMEOUT_SECONDS)
    url = transport.host
    down = False
    try:
        while True:
            try:
                async with asyncio.timeout(TIMEOUT_SECONDS):
                    await transport.request("GET", "/version")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure is the thing to report
                log.warning(
                    "cannot reach the API server at %s: %s (retrying every %.0fs)",
                    url,
                    cause(exc),
                    WHILE_DOWN_SECONDS,
                )
                down = True
            else:
                if down:
                    log.info("the API server at %s answers again", url)
                down = False
            await asyncio.sleep(WHILE_DOWN_SECONDS if down else WHILE_UP_SECONDS)
    finally:
        await transport.close()
