"""Credentials from image pull secrets, and the challenges registries answer with.

A pull secret is a docker config JSON (`.dockerconfigjson`, `{"auths": {host: ...}}`) or
the older `.dockercfg` (hosts at the top level); an entry holds `auth` (base64 of
`user:password`) or `username` and `password`. A registry that wants credentials answers
401 with `WWW-Authenticate: Basic ...` or `Bearer realm=...,service=...,scope=...` (the
token flow: the realm hands out a token for the scope, asked with Basic credentials when
there are some).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from components.preflight._reference import ImageRef


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password: str

    def header(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()


def _host_of(key: str) -> str:
    """`https://index.docker.io/v1/` -> `index.docker.io`: configs key hosts many ways."""
    key = key.strip()
    for scheme in ("https://", "http://"):
        if key.startswith(scheme):
            key = key[len(scheme) :]
    return key.split("/", 1)[0].lower()


def _entry_auth(entry: Any) -> BasicAuth | None:
    if not isinstance(entry, Mapping):
        return None
    encoded = entry.get("auth")
    if isinstance(encoded, str) and encoded:
        try:
            user, sep, password = base64.b64decode(encoded).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return BasicAuth(user, password) if sep else None
    name, secret = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(secret, str):
        return BasicAuth(name, secret)
    return None


def docker_config_auths(data: Mapping[str, str]) -> dict[str, BasicAuth]:
    """A Secret's `data` (base64 values, as the API returns them) -> credentials by host."""
    found: dict[str, BasicAuth] = {}
    for key in (".dockerconfigjson", ".dockercfg"):
        raw = data.get(key)
        if not raw:
            continue
        try:
            config = json.loads(base64.b64decode(raw))
        except (binascii.Error, ValueError):
            continue
        if not isinstance(config, Mapping):
            continue
        entries = config.get("auths") if key == ".dockerconfigjson" else config
        if not isinstance(entries, Mapping):
            continue
        for host, entry in entries.items():
            auth = _entry_auth(entry)
            if auth is not None:
                found.setdefault(_host_of(str(host)), auth)
    return found


def credentials_for(ref: ImageRef, auths: Iterable[Mapping[str, BasicAuth]]) -> BasicAuth | None:
    """The first secret's credentials for the image's registry (the kubelet's order)."""
    for by_host in auths:
        for host in ref.auth_hosts:
            if host.lower() in by_host:
                return by_host[host.lower()]
    return None


_PARAM = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]*))')


@dataclass(frozen=True, slots=True)
class Challenge:
    scheme: str
    """`basic` or `bearer` (lower case)."""
    params: Mapping[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    params = {m.group(1).lower(): m.group(2) or m.group(3) or "" for m in _PARAM.finditer(rest)}
    return Challenge(scheme.lower(), params)
