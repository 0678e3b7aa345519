"""Reading a config a user keeps in a ConfigMap (the device plugin's), whatever it holds.

A ConfigMap is anyone's text: up to about 1 MiB, nested as deep as they like. Read with
PyYAML's pure-Python loader, a 5,000-deep nesting raised RecursionError (every reconcile
failed) and a 900 KB flow list cost 16 s of CPU (past the leader election's 10 s renew
deadline). So a config is read with bounds (`components.api.load_documents`: libyaml where
PyYAML has it, at most 100 levels, aliases capped) after a size check, and what cannot be
read is a sentence, never an exception. A duplicate key is refused too, where the plugin
would silently take the last one: better a condition naming the line than a daemon there or
not by the order of two keys. The controller reads each ConfigMap once per version, in a
worker thread (`controllers._view.ConfigDocuments`).
"""

from __future__ import annotations

from components.api import YAMLProblem, load_documents
from components.operands._contract import ConfigDocument

MAX_CONFIG_BYTES = 64 * 1024
"""One config (one key) larger than this is not read. The device plugin's configs are a few
hundred bytes; libyaml reads 64 KiB in tens of milliseconds."""


def read_config(text: str) -> ConfigDocument:
    """The one YAML document `text` holds, or why it cannot be read."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        return ConfigDocument(
            problem=f"it is {-(-size // 1024)} KiB, over the {MAX_CONFIG_BYTES // 1024} KiB "
            "a device-plugin config may be"
        )
    try:
        documents = load_documents(text)
    except YAMLProblem as exc:
        return ConfigDocument(problem=f"{exc}{_at(exc)}")
    if len(documents) > 1:
        return ConfigDocument(
            problem=f"it holds {len(documents)} YAML documents where a config is one"
        )
    return ConfigDocument(content=documents[0] if documents else None)


def _at(exc: YAMLProblem) -> str:
    if exc.line is None:
        return ""
    return f" (line {exc.line}, column {exc.column})" if exc.column else f" (line {exc.line})"
