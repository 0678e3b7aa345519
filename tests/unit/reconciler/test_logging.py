"""Log lines as a log pipeline reads them: one JSON object each, UTC time, and the object
being reconciled named on every line logged while it is."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from reconciler import Request, configure_logging
from reconciler.lowlevel import reconciling


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    out = io.StringIO()
    yield out
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_utc_time_level_logger_and_message(stream: io.StringIO) -> None:
    configure_logging("info", "json", stream)
    logging.getLogger("components.x").info("applied %s", "DaemonSet gpu-operator/driver")
    logging.getLogger("components.x").debug("not at info")
    [line] = lines(stream)
    assert line["level"] == "info"
    assert line["logger"] == "components.x"
    assert line["msg"] == "applied DaemonSet gpu-operator/driver"
    assert str(line["ts"]).endswith("Z")
    assert "controller" not in line and "name" not in line


def test_lines_logged_during_a_reconcile_name_its_object(stream: io.StringIO) -> None:
    configure_logging("debug", "json", stream)
    with reconciling("clusterpolicy", Request("", "cluster-policy")):
        logging.getLogger("components.x").warning("driver not ready")
    with reconciling("upgrade", Request("gpu-operator", "driver-abc")):
        logging.getLogger("components.x").error("failed", extra={"kind": "Pod"})
    logging.getLogger("components.x").info("after")
    first, second, after = lines(stream)
    assert (first["controller"], first["name"]) == ("clusterpolicy", "cluster-policy")
    assert "namespace" not in first
    assert (second["namespace"], second["name"], second["kind"]) == (
        "gpu-operator",
        "driver-abc",
        "Pod",
    )
    assert "name" not in after


def test_text_lines_name_the_object_too(stream: io.StringIO) -> None:
    configure_logging("info", "text", stream)
    with reconciling("clusterpolicy", Request("", "cluster-policy")):
        logging.getLogger("components.x").info("ready")
    assert stream.getvalue().rstrip().endswith("components.x: ready [clusterpolicy cluster-policy]")
