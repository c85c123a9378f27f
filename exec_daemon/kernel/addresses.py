"""Which network addresses are not public (loopback, private, link-local and cloud metadata,
multicast, unspecified, reserved), and the operator's exceptions to that. Used by the sandbox's
network proxy and by the fetch tools."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(parts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Networks from "127.0.0.0/8"-like texts (an address alone is its /32 or /128); blanks are
    skipped. Raises ValueError on anything else."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in parts if part.strip())


def unmapped(address: IPAddress) -> IPAddress:
    """`::ffff:127.0.0.1` is 127.0.0.1 (so are other IPv4-in-IPv6 spellings the kernel routes)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def non_public_reason(address: IPAddress, exceptions: Iterable[IPNetwork] = ()) -> str | None:
    """Why `address` must not be reached, or None when it is public or in `exceptions`."""
    address = unmapped(address)
    if any(address in net for net in exceptions if net.version == address.version):
        return None
    if address.is_multicast or not address.is_global:
        return f"{address} is a private, local or metadata address"
    return None
