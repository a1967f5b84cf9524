"""A node's own IP address on the shared host: one end of a veth pair carrying one /32 of
198.18.0.0/15 (RFC 2544's benchmarking range, never routed on a real network). A veth pair rather
than a dummy link: the bed's kernels need veth for the VF stand-ins anyway, and some lack dummy.

The bed's nodes share the host's network namespace. Host-network Pods of the installed product
listen for kubelet's probes on their Pod IP, which is the node's IP, so two nodes with one IP would
fight over each port. Each installed node therefore gets an address of its own; the kubelet is
started with it as ``--node-ip`` and probes it, as a kubelet probes a real node's address.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from sriov_contract.errors import ReasonedError

NETWORK = "198.18.0"
LINK_PREFIX = "asrnode"  # plus the index (and "p" for the peer): a name within IFNAMSIZ


@dataclass(frozen=True)
class NodeAddress:
    index: int

    @property
    def ip(self) -> str:
        return f"{NETWORK}.{self.index + 1}"

    @property
    def link(self) -> str:
        return f"{LINK_PREFIX}{self.index}"

    def add(self) -> None:
        """Create the link with its address, replacing one a killed run left behind."""
        self.remove()
        for argv in (
            ["ip", "link", "add", self.link, "type", "veth", "peer", "name", f"{self.link}p"],
            ["ip", "addr", "add", f"{self.ip}/32", "dev", self.link],
            ["ip", "link", "set", f"{self.link}p", "up"],
            ["ip", "link", "set", self.link, "up"],
        ):
            out = subprocess.run(argv, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise ReasonedError("NodeAddressFailed", f"{' '.join(argv)}: {out.stderr.strip()}")

    def remove(self) -> None:
        """Idempotent: nothing to do when the link is gone (deleting one end deletes both)."""
        subprocess.run(["ip", "link", "del", self.link], capture_output=True, check=False)
