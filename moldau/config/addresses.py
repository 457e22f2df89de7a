"""Listener and quorum voter addresses: parsing ``NAME://host:port``, ``id@host:port`` and the listener
security protocol map, and the validators the broker table uses for them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from moldau.config.schema import ConfigValue, Custom
from moldau.text import ascii_digits


class Listener(NamedTuple):
    """A parsed ``NAME://host:port`` entry; an empty host means all interfaces."""

    name: str
    host: str
    port: int


class Voter(NamedTuple):
    """A parsed ``id@host:port`` entry of ``controller.quorum.voters``."""

    node_id: int
    host: str
    port: int


# A host is a bracketed IPv6 address or a name/IPv4 address without colons; it may be empty.
_HOST = r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]/\s@]*)"
_LISTENER_RE = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)://" + _HOST + r":(?P<port>[0-9]{1,5})\Z")
_VOTER_RE = re.compile(r"(?P<id>[0-9]+)@" + _HOST + r":(?P<port>[0-9]{1,5})\Z")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _host_port(match: re.Match[str], text: str) -> tuple[str, int]:
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"port {port} in {text} is not in 0..65535")
    return match["host"].removeprefix("[").removesuffix("]"), port


def parse_listener(text: str) -> Listener:
    """Parse ``NAME://host:port``; the name is upper-cased as Kafka does. Raises ValueError."""
    match = _LISTENER_RE.match(text.strip())
    if match is None:
        raise ValueError(f"Unable to parse {text} to a listener; expected NAME://host:port")
    host, port = _host_port(match, text)
    return Listener(match["name"].upper(), host, port)


def parse_voter(text: str) -> Voter:
    """Parse ``id@host:port``. Raises ValueError."""
    match = _VOTER_RE.match(text.strip())
    if match is None or not match["host"]:
        raise ValueError(f"Unable to parse {text} to a quorum voter; expected id@host:port")
    host, port = _host_port(match, text)
    return Voter(int(match["id"]), host, port)


def _check_listeners(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        listeners = [parse_listener(item) for item in value]
    except ValueError as error:
        return str(error)
    names = [listener.name for listener in listeners]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        return f"Each listener must have a different name, found duplicates: {', '.join(duplicates)}"
    return None


def _check_voters(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        for item in value:
            parse_voter(item)
    except ValueError as error:
        return str(error)
    return None


def parse_protocol_map(items: Iterable[str]) -> dict[str, str]:
    """Parse ``NAME:PROTOCOL`` entries into a dict keyed by upper-cased listener name. Raises ValueError."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"Expected NAME:PROTOCOL with PROTOCOL one of {', '.join(_SECURITY_PROTOCOLS)}")
        if name in result:
            raise ValueError(f"Listener name {name} is mapped more than once")
        result[name] = protocol
    return result


def _check_protocol_map(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        parse_protocol_map(value)
    except ValueError as error:
        return str(error)
    return None


def parse_host_port(text: str) -> tuple[str, int]:
    """Parse ``host:port`` (``[v6]:port`` too). Raises ValueError."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host.strip("[]") or not ascii_digits(port) or not 0 < int(port) < 65536:
        raise ValueError(f"Unable to parse {text} as host:port")
    return host.strip("[]"), int(port)


def _check_bootstrap_servers(value: ConfigValue) -> str | None:
    if not isinstance(value, tuple):
        return None
    try:
        for item in value:
            parse_host_port(item)
    except ValueError as error:
        return str(error)
    return None


LISTENERS = Custom(_check_listeners, "a comma-separated list of NAME://host:port")
BOOTSTRAP_SERVERS = Custom(_check_bootstrap_servers, "a comma-separated list of host:port")
VOTERS = Custom(_check_voters, "a comma-separated list of id@host:port")
PROTOCOL_MAP = Custom(_check_protocol_map, "a comma-separated list of NAME:SECURITY_PROTOCOL")


def _check_http_listener(value: ConfigValue) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    if re.fullmatch(r"https?://" + _HOST + r":[0-9]{1,5}/?", value.strip()) is None:
        return "Expected http://host:port or https://host:port, or an empty string"
    return None


# An HTTP service's listener (the schema registry's): one http:// or https://host:port URL, or empty for none.
HTTP_LISTENER = Custom(_check_http_listener, "http(s)://host:port, or empty")
