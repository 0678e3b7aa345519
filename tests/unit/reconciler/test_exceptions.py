"""API errors arrive typed, with the server's own message."""

from __future__ import annotations

import json

import pytest

from reconciler.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)
from reconciler.lowlevel import error_from_status

pytestmark = pytest.mark.unit


def status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}
    ).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (422, "Invalid", Invalid),
        (404, "NotFound", NotFound),
        (410, "Expired", Gone),
        (403, "Forbidden", Forbidden),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (418, "", ApiError),
    ],
)
def test_status_maps_to_type(code: int, reason: str, cls: type[ApiError]) -> None:
    err = error_from_status(code, status(code, reason, "the server's words"))
    assert type(err) is cls
    assert err.message == "the server's words"
    assert err.status == code
    assert "the server's words" in str(err)


def test_conflict_and_already_exists_are_not_confused() -> None:
    assert not isinstance(error_from_status(409, status(409, "AlreadyExists", "")), Conflict)


def test_non_json_body_still_gives_a_message() -> None:
    err = error_from_status(502, b"Bad Gateway\n", retry_after=3)
    assert isinstance(err, ServerError)
    assert err.message == "Bad Gateway"
    assert err.retry_after == 3
