"""Host names, origins and base URLs as the service's settings state them, and the matching
of a request's ``Host`` header and ``Origin`` against them.

- an allowed host is a name or an address without a port (``docs.example.com``,
  ``10.0.0.5``, ``::1`` or ``[::1]``), ``.example.com`` for that name and every name under
  it, or ``*`` for any host;
- an origin is ``scheme://host[:port]`` exactly as a browser sends it (``*`` is refused);
- a public URL is ``http(s)://host[:port][/path]``, without a query or a fragment.

Each parser raises ValueError with a readable message; the settings turn it into a
ConfigError naming the variable.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

#: the names a loopback service is reached by: allowed when no host list is configured
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def split_list(value: object) -> list[str]:
    """A comma-separated string, or a list of strings, as stripped non-empty items."""
    if isinstance(value, str):
        items: Iterable[object] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise ValueError("must be a comma-separated list")
    result = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError("must be a list of strings")
        if item.strip():
            result.append(item.strip())
    return result


def normal_host(text: str) -> str | None:
    """A host name or address in its compared form (lower case, no trailing dot, an IPv6
    address without brackets), or None if it is neither."""
    host = text.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            return str(ipaddress.IPv6Address(host))
        except ValueError:
            return None
    if ":" in host:
        try:
            return str(ipaddress.IPv6Address(host))
        except ValueError:
            return None
    host = host.removesuffix(".")
    return host if host.isascii() and _NAME.fullmatch(host) else None


def parse_allowed_host(text: str) -> str:
    """One entry of ``BLOBLEDGER_ALLOWED_HOSTS`` in its compared form."""
    if text == "*":
        return text
    subdomains = text.startswith(".")
    host = normal_host(text[1:] if subdomains else text)
    if host is None:
        raise ValueError(f"{text!r} is not a host name or address (without a port: any "
                         "port is accepted)")
    return "." + host if subdomains else host


def parse_origin(text: str) -> str:
    """One entry of ``BLOBLEDGER_CORS_ORIGINS`` as a browser serialises it."""
    if text == "*" or "*" in text:
        raise ValueError("'*' is not allowed: list each origin (scheme://host[:port])")
    parts = urlsplit(text.strip())
    host = normal_host(parts.hostname or "") if parts.hostname else None
    if parts.scheme not in DEFAULT_PORTS or host is None or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{text!r} is not an origin (scheme://host[:port])")
    return _serialise(parts.scheme, host, _port(parts.scheme, text))


def parse_public_url(text: str) -> str:
    """``BLOBLEDGER_PUBLIC_URL`` without its trailing slash."""
    parts = urlsplit(text.strip())
    host = normal_host(parts.hostname or "") if parts.hostname else None
    if parts.scheme not in DEFAULT_PORTS or host is None or parts.query or parts.fragment \
            or parts.username or parts.password:
        raise ValueError(f"{text!r} is not an http(s) URL (scheme://host[:port][/path])")
    return _serialise(parts.scheme, host, _port(parts.scheme, text)) + parts.path.rstrip("/")


def _port(scheme: str, text: str) -> int | None:
    try:
        port = urlsplit(text.strip()).port
    except ValueError:
        raise ValueError(f"{text!r} has an invalid port") from None
    return None if port == DEFAULT_PORTS[scheme] else port


def _serialise(scheme: str, host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + (f":{port}" if port is not None else "")


def base_url(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]`` for an address (an IPv6 one bracketed, a default port left
    out)."""
    return _serialise(scheme, host, None if port == DEFAULT_PORTS.get(scheme) else port)


def parse_authority(authority: str) -> tuple[str, int | None] | None:
    """The host (compared form) and port of a ``Host`` header value (``name``,
    ``name:port``, ``[v6]:port``), or None if the value is not one."""
    value = authority.strip()
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[:end + 1], value[end + 1:]
    else:
        host, colon, port_text = value.partition(":")
        rest = colon + port_text
    if rest and not (rest.startswith(":") and rest[1:].isascii()
                     and (rest[1:].isdigit() or rest == ":") and len(rest) <= 6):
        return None
    name = normal_host(host) if host else None
    if name is None:
        return None
    return name, int(rest[1:]) if rest[1:] else None


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (compared form) is one of ``allowed`` (see the module's rules)."""
    for entry in allowed:
        if entry == "*" or entry == host:
            return True
        if entry.startswith(".") and (host == entry[1:] or host.endswith(entry)):
            return True
    return False


def same_authority(origin: str, authority: str) -> bool:
    """Whether an ``Origin`` header names the host and port of a ``Host`` header (a
    missing port being the origin's scheme's default); never for ``null``."""
    theirs = parse_authority(authority)
    try:
        parts = urlsplit(origin.strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError:  # brackets that hold no address, a port that is not a number
        return False
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or theirs is None:
        return False
    return normal_host(parts.hostname) == theirs[0] \
        and port == (theirs[1] or DEFAULT_PORTS[parts.scheme])
