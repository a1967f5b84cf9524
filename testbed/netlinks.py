"""Links and addresses as ``ip -j`` shows them: in a network namespace, or in the host's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from typing import Any


def ns_links(netns_path: str) -> dict[str, Any]:
    """Links (with ``addr_info``) inside a netns, keyed by name, as ``ip -j addr`` shows them.

    Named netns live in /run/netns; containerd's (the real node's) live under its state dir, which
    ``ip -n`` cannot name, so those are entered by path."""
    parent, name = netns_path.rsplit("/", 1)
    if parent in ("/run/netns", "/var/run/netns"):
        argv = ["ip", "-n", name, "-j", "addr"]
    else:
        argv = ["nsenter", f"--net={netns_path}", "ip", "-j", "addr"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {link["ifname"]: link for link in json.loads(out.stdout)}


def ipv4_addresses(link: Mapping[str, Any]) -> list[str]:
    return [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", []) if a["family"] == "inet"]


def host_link(name: str) -> dict[str, Any] | None:
    out = subprocess.run(["ip", "-j", "link", "show", name], capture_output=True, text=True, check=False)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None
