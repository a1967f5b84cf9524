"""Session guard: the suite leaves no network namespace or veth of ours on the machine.

Before the first test and after the last fixture teardown it lists the network namespaces with the
names our test bed gives them (the simulated kubelet's ``ks-`` sandboxes, the ``netns`` fixture's
``h4t-``, the fake node's ``fakesriov-`` wire) and the veth links of the host namespace. Anything
new at the end fails the session and is named. Only the difference counts: the machine is shared,
and what others left before the session started is not ours to judge.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from testbed.waiting import WaitTimeout, wait_for

NETNS_DIR = "/run/netns"
OUR_NETNS_PREFIXES = ("ks-", "h4t-", "fakesriov-")
# A netns removed without CNI DEL takes its veth pair with it, but the kernel does that
# asynchronously; only what is still there after this is a leak.
SETTLE_SECONDS = 10.0


def our_netns() -> set[str]:
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return set()
    return {n for n in names if n.startswith(OUR_NETNS_PREFIXES)}


def host_veths() -> set[str]:
    out = subprocess.run(
        ["ip", "-j", "link", "show", "type", "veth"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        return set()
    return {str(link["ifname"]) for link in json.loads(out.stdout or "[]")}


def snapshot() -> set[str]:
    return {f"netns {n}" for n in our_netns()} | {f"veth {n}" for n in host_veths()}


def new_since(before: set[str]) -> list[str]:
    return sorted(snapshot() - before)


@pytest.fixture(scope="session", autouse=True)
def no_netns_or_veth_left_behind() -> Iterator[None]:
    if shutil.which("ip") is None:
        yield
        return
    before = snapshot()
    yield
    try:
        wait_for(lambda: not new_since(before), SETTLE_SECONDS, what="the session's netns and veths gone")
    except WaitTimeout:
        left = new_since(before)
        pytest.fail(f"the test session left {len(left)} netns/veth of ours behind: {', '.join(left)}")
