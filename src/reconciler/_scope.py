"""What an informer watches of its kind: one namespace or all, narrowed by selectors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """The part of a kind an informer lists and watches: one namespace (`None`: all) and
    the label and field selectors the API server filters by. The cache holds one informer
    per kind, so it compares scopes: a second, different one cannot be served from it."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def selectors(self) -> dict[str, str]:
        """The query parameters of each list and watch."""
        out: dict[str, str] = {}
        if self.label_selector:
            out["labelSelector"] = self.label_selector
        if self.field_selector:
            out["fieldSelector"] = self.field_selector
        return out


WHOLE_KIND = Scope()
"""Every object of the kind, in every namespace."""
