"""The checks of a scenario run (spec 14.4): what the scheduler allocated, the shadow NADs and
their content, the interfaces, addresses and PCIe roots inside the Pod, that no user selected a
network, that the sources stayed unchanged, that the CNI side read no DRA object, the CNI mode;
and after the Pod is gone (``teardown_checks``) or the stack is down (``stack_down_check``),
that nothing of this run is left."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import netaddr
import yaml

from sriov_contract import keys
from sriov_dra.model import ATTR_PCIE_ROOT
from testbed.cluster import CLEANUP_TIMEOUT
from testbed.deployment import CNI_NAMESPACE, CNI_SA, service_account_user
from testbed.driver import DRIVER
from testbed.gpu_plugin import GPU_DRIVER
from testbed.netlinks import host_link, ipv4_addresses
from testbed.nodecni import LIBCNI_CACHE_DIR
from testbed.observation import Observed, allocation_results, shadow_binding
from testbed.realnode import RealNodeError
from testbed.results import SKIP, Check, check
from testbed.waiting import WaitTimeout, wait_for
from testbed.workloads import Workload, network_names

if TYPE_CHECKING:
    from testbed.fakenode import FakeNode
    from testbed.sriov_topology import VfRecord
    from testbed.stack import Stack

NETNS_SETTLE_TIMEOUT = 10.0  # the kernel destroys a removed netns, and the veths in it, asynchronously


def vf_of(stack: Stack, pci: str) -> VfRecord | None:
    return next((vf for vf in stack.fake_node.vfs if vf.pci == pci), None)


def check_allocation(obs: Observed, gpus: int, vfs: int) -> Check:
    results = allocation_results(obs.claim)
    got_gpus = {(r["pool"], r["device"]) for r in results if r["driver"] == GPU_DRIVER}
    got_vfs = {(r["pool"], r["device"]) for r in results if r["driver"] == DRIVER}
    detail = f"{len(got_gpus)} distinct GPU result(s), {len(got_vfs)} distinct VF result(s) of {len(results)}"
    return check(
        f"the scheduler allocated {gpus} distinct GPUs and {vfs} distinct VFs",
        (len(got_gpus), len(got_vfs), len(results)) == (gpus, vfs, gpus + vfs),
        detail,
    )


def check_shadows(obs: Observed, expected: int) -> Check:
    name = f"exactly {expected} shadow NAD(s), each with the exact Pod ownerReference (blockOwnerDeletion false) and the finalizer"
    meta = obs.pod["metadata"]
    want = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "uid": meta["uid"],
            "blockOwnerDeletion": False,
        }
    ]
    problems = []
    for nad in obs.shadows:
        refs = [
            {k: v for k, v in r.items() if k != "controller" or v}
            for r in nad["metadata"].get("ownerReferences") or []
        ]
        if refs != want:
            problems.append(f"{nad['metadata']['name']}: ownerReferences {refs}")
        if keys.PROTECTION_FINALIZER not in (nad["metadata"].get("finalizers") or []):
            problems.append(f"{nad['metadata']['name']}: no {keys.PROTECTION_FINALIZER}")
    if len(obs.shadows) != expected:
        problems.insert(0, f"found {len(obs.shadows)}")
    return check(
        name, not problems, "; ".join(problems) or ", ".join(s["metadata"]["name"] for s in obs.shadows)
    )


def check_interfaces(obs: Observed) -> Check:
    want = {row.request: f"dra{i}" for i, row in enumerate(obs.rows)}
    got = {row.request: row.interface for row in obs.rows}
    names = ", ".join(f"{r} -> {i}" for r, i in got.items())
    verb = " become " if len(want) > 1 else " becomes "
    return check(" and ".join(want) + verb + " and ".join(want.values()), got == want and bool(want), names)


CONTAINER_RUNNING_TIMEOUT = 30.0
RDMA_CHECK = "the container holds its own VFs' RDMA devices, network-status names them"


def rdma_vfs(stack: Stack, obs: Observed) -> list[VfRecord]:
    """The Pod's VFs that have an RDMA device on the fake node."""
    vfs = [vf_of(stack, row.vf_pci) for row in obs.rows]
    return [vf for vf in vfs if vf is not None and vf.rdma_device]


def _rdma_of(stack: Stack, pci: str) -> str:
    vf = vf_of(stack, pci)
    return vf.rdma_device if vf is not None and vf.rdma_device else "-"


def check_rdma(stack: Stack, obs: Observed, container: str) -> Check:
    """Inside the running container: exactly the verbs nodes of the Pod's own RDMA VFs (and
    rdma_cm) under /dev/infiniband, upstream's variables naming them; in network-status each
    interface's device-info names its VF's RDMA device. Other VFs' nodes exist on the node too."""
    own = rdma_vfs(stack, obs)
    problems = [
        f"{row.interface}: network-status names RDMA device {row.rdma}, the VF has {_rdma_of(stack, row.vf_pci)}"
        for row in obs.rows
        if row.rdma != _rdma_of(stack, row.vf_pci)
    ]
    if not stack.real:
        return Check(RDMA_CHECK, SKIP, "the simulated kubelet runs no container; network-status only")
    # A Pod's sandbox may be re-created by the kubelet right after it ran (seen once in thin mode);
    # its container then starts again, so wait for a running one rather than fail the scenario.
    runtime = stack.node_runtime
    try:
        pid = wait_for(
            lambda: runtime.container_pid(obs.uid, container),
            CONTAINER_RUNNING_TIMEOUT,
            what=f"a running container {container} in Pod UID {obs.uid}",
            ignore=(RealNodeError,),
        )
    except WaitTimeout as exc:
        return check(RDMA_CHECK, False, exc.message)
    root = f"/proc/{pid}/root/dev/infiniband"
    try:
        seen = sorted(os.listdir(root))
    except OSError:
        seen = []
    want = sorted([vf.uverbs for vf in own] + ["rdma_cm"])
    if seen != want:
        problems.append(f"/dev/infiniband holds {seen}, want {want}")
    with open(f"/proc/{pid}/environ", "rb") as fh:
        env = set(fh.read().decode(errors="replace").split("\0"))
    for vf in own:
        infix = vf.pci.replace(":", "_").replace(".", "_")
        for var in (
            f"SRIOVNETWORK_{infix}_RDMA_DEVICE={vf.rdma_device}",
            f"SRIOVNETWORK_{infix}_RDMA_UVERB=/dev/infiniband/{vf.uverbs}",
        ):
            if var not in env:
                problems.append(f"{var} not in the container's environment")
    detail = "; ".join(problems) or ", ".join(f"{vf.netdev}: {vf.rdma_device} ({vf.uverbs})" for vf in own)
    return check(RDMA_CHECK, not problems, detail)


def check_addresses(stack: Stack, obs: Observed) -> Check:
    problems = []
    for row in obs.rows:
        vf = vf_of(stack, row.vf_pci)
        if vf is None:
            problems.append(f"{row.request}: VF {row.vf_pci} is not on the fake node")
            continue
        inside = ipv4_addresses(obs.links.get(row.interface, {}))
        if not inside:
            problems.append(f"{row.request}: no IPv4 address on {row.interface} in the Pod netns")
        for addr in inside:
            if netaddr.IPNetwork(addr).ip not in netaddr.IPNetwork(vf.subnet):
                problems.append(f"{row.request}: {addr} on {row.interface} is outside {vf.rail} {vf.subnet}")
    detail = "; ".join(problems) or ", ".join(f"{r.interface} {r.ip} in {r.rail}" for r in obs.rows)
    return check(
        "each IP is inside its own rail's subnet, on the named interface inside the Pod netns",
        not problems and bool(obs.rows),
        detail,
    )


def check_pcie_roots(stack: Stack, obs: Observed) -> Check:
    gpus = stack.gpus.attributes()
    topology = {g.name: g.pcie_root for g in stack.fake_node.gpus}
    problems, pairs = [], []
    for row in obs.rows:
        gpu = row.gpu
        vf = vf_of(stack, row.vf_pci)
        published = str(gpus.get(gpu, {}).get(ATTR_PCIE_ROOT, {}).get("string", ""))
        roots = {published, row.pcie_root, topology.get(gpu, ""), vf.pcie_root if vf else ""}
        pairs.append(f"{row.gpu}+{row.request} on {row.pcie_root}")
        if len(roots) != 1 or "" in roots:
            problems.append(f"{row.gpu} / {row.request}: roots {sorted(roots)}")
    return check(
        "each pair's GPU and VF share a pcieRoot (published and in the node's topology)",
        not problems and bool(pairs),
        "; ".join(problems) or ", ".join(pairs),
    )


def check_no_user_selection(obs: Observed, workload: Workload, source_names: Sequence[str]) -> Check:
    problems = []
    annotations = workload.pod["metadata"].get("annotations") or {}
    if keys.NETWORKS_ANNOTATION in annotations:
        problems.append("the workload Pod YAML has a networks annotation")
    text = yaml.safe_dump_all([*workload.workload, workload.pod])
    problems += [f"workload YAML names {word!r}" for word in [*source_names, "resourceName"] if word in text]
    live = obs.pod["metadata"].get("annotations") or {}
    registry = json.loads(live.get(keys.REGISTRY_ANNOTATION, '{"entries": []}'))
    owned = {(e["namespace"], e["name"], e["interface"]) for e in registry.get("entries", [])}
    selections = json.loads(live.get(keys.NETWORKS_ANNOTATION, "[]"))
    ns = obs.pod["metadata"]["namespace"]
    user = [s for s in selections if (s.get("namespace", ns), s["name"], s.get("interface")) not in owned]
    if user:
        problems.append(f"the live Pod has selections nobody generated: {user}")
    detail = (
        "; ".join(problems) or f"{len(selections)} selection(s) on the live Pod, all generated by the driver"
    )
    return check(
        "no user-written networks annotation; the workload YAML selects no NAD", not problems, detail
    )


def check_shadow_content(stack: Stack, obs: Observed, workload: Workload) -> Check:
    """Each shadow is bound to this Pod, claim and node, carries its VF's PCI as the sriov
    deviceID, and keeps its source's CNI network name and rail IPAM exactly."""
    sources = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): json.loads(d["spec"]["config"])
        for d in workload.admin
        if d["kind"] == "NetworkAttachmentDefinition"
    }
    want = (obs.uid, obs.claim["metadata"]["uid"], obs.pod["spec"]["nodeName"])
    problems = []
    for nad in obs.shadows:
        name, binding = nad["metadata"]["name"], shadow_binding(nad)
        config = json.loads(nad["spec"]["config"])
        source = sources.get((binding["source"]["namespace"], binding["source"]["name"]))
        if (binding["podUID"], binding["claimUID"], binding["nodeName"]) != want:
            problems.append(
                f"{name}: bound to {binding['podUID']}/{binding['claimUID']}/{binding['nodeName']}"
            )
        if (config.get("type"), config.get("deviceID")) != ("sriov", binding["pciAddress"]):
            problems.append(f"{name}: type/deviceID {config.get('type')}/{config.get('deviceID')}")
        if source is None:
            problems.append(f"{name}: source {binding['source']} is not one of the administrator's NADs")
        elif (config.get("name"), config.get("ipam")) != (source["name"], source["ipam"]):
            problems.append(f"{name}: CNI name or IPAM differs from its source")
    detail = "; ".join(problems) or ", ".join(
        f"{shadow_binding(n)['pciAddress']} from {shadow_binding(n)['source']['name']}" for n in obs.shadows
    )
    return check(
        "each shadow is bound to this Pod/claim/node, has its VF as deviceID, and keeps its source's "
        "CNI name and rail IPAM",
        not problems and bool(obs.shadows),
        detail,
    )


def check_device_status(obs: Observed) -> Check:
    """What a DRA user reads on the claim: our driver's status.devices entry for each allocated VF,
    Ready, naming the shadow that serves it; other drivers' devices are not ours to report."""
    ours = {(r["pool"], r["device"]) for r in allocation_results(obs.claim) if r["driver"] == DRIVER}
    shadows = {s["metadata"]["name"] for s in obs.shadows}
    ready: dict[tuple[str, str], str | None] = {}  # our reported device -> its shadow, None if not Ready
    for entry in (obs.claim.get("status") or {}).get("devices") or []:
        if entry["driver"] == DRIVER:
            conditions = entry.get("conditions") or []
            is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            shadow = ((entry.get("data") or {}).get("shadow") or {}).get("name")
            ready[(entry["pool"], entry["device"])] = str(shadow) if is_ready else None
    problems = [
        f"{device}: not reported Ready" for pool, device in sorted(ours) if not ready.get((pool, device))
    ]
    problems += [f"{device}: reported, not allocated" for pool, device in sorted(set(ready) - ours)]
    problems += [
        f"{device}: names {shadow}, no shadow of this Pod"
        for (pool, device), shadow in sorted(ready.items())
        if shadow is not None and shadow not in shadows
    ]
    return check(
        "the claim's status.devices reports each allocated VF Ready, with its shadow",
        not problems and bool(ours),
        "; ".join(problems) or ", ".join(f"{d}: {s}" for (_, d), s in sorted(ready.items())),
    )


def check_sources_unchanged(
    before: Mapping[str, tuple[str, str, str]], after: Mapping[str, tuple[str, str, str]]
) -> Check:
    changed = [name for name in before if before[name] != after.get(name)]
    return check(
        "the source NADs are unchanged (uid, resourceVersion, config)",
        not changed,
        ", ".join(changed) or ", ".join(before),
    )


def check_cni_reads(stack: Stack, since: int) -> Check:
    user = cni_user(stack)
    events = stack.bed.audit.events(since=since, user=user)
    dra = [f"{e.verb} {e.resource}" for e in events if e.group == "resource.k8s.io"]
    detail = f"{len(events)} request(s) by {user}, {len(dra)} to resource.k8s.io" + (
        f": {dra}" if dra else ""
    )
    return check("the audit log shows zero DRA reads by the CNI side", not dra and bool(events), detail)


def cni_user(stack: Stack) -> str:
    """Who the API server sees when the CNI side reads: the DaemonSet's ServiceAccount where the
    product is installed, else the bed's client-certificate identity for it."""
    if stack.installed:
        return service_account_user(CNI_NAMESPACE, CNI_SA)[0]
    return stack.bed.user_of("cni")


CNI_MODE_CHECK = "CNI runs thick: cni-shim hands ADD to cni-shim-daemon, which reads the Pod live"


def check_cni_mode(stack: Stack, obs: Observed, since: int) -> Check:
    name = CNI_MODE_CHECK
    if not stack.thick:
        return Check(name, SKIP, "thin mode was chosen for this run")
    meta = obs.pod["metadata"]
    pod = f"{meta['namespace']}/{meta['name']}"
    adds = stack.cni.daemon_answers("ADD", pod)
    gets = stack.bed.audit.count(
        since=since, user=cni_user(stack), verb="get", resource="pods", name=meta["name"]
    )
    detail = f"cni-shim-daemon answered ADD ok for {pod} {adds} time(s); {gets} live GET(s) of the Pod"
    return check(name, adds >= 1 and gets >= 1, detail)


def teardown_checks(stack: Stack, workload: Workload, pod_refs: Sequence[str]) -> list[Check]:
    checks = []

    def poll(what: str, probe: Callable[[], list[str]], timeout: float = CLEANUP_TIMEOUT) -> list[str]:
        with contextlib.suppress(WaitTimeout):
            wait_for(lambda: not probe(), timeout, what=what, interval=0.25)
        return probe()

    left = poll(
        "shadows gone", lambda: [s["metadata"]["name"] for s in stack.cluster.shadows(workload.namespace)]
    )
    checks.append(check("no shadow NADs are left", not left, ", ".join(left)))
    held = poll(
        "whereabouts allocations released",
        lambda: (
            stack.cluster.whereabouts_allocations(network_names(workload))
            + stack.cluster.reserved_ips(pod_refs)
        ),
    )
    checks.append(check("whereabouts holds no allocations", not held, ", ".join(held)))
    away = poll("VFs back on the host", lambda: vfs_not_home(stack.fake_node))
    checks.append(
        check("every VF is back on the host under its original name and MAC", not away, ", ".join(away))
    )
    claims = sorted(stack.driver.checkpoint_claims())
    checks.append(check("the driver's checkpoint is empty", not claims, ", ".join(claims)))
    # The kubelet finished every teardown before it deleted the Pod, and stop_pod saw the Pod gone.
    # Each check also needs something to have been made: a check of nothing would pass blind.
    made, host_ends = stack.kubelet.sandboxes_made()
    sandboxes = stack.kubelet.leftover_netns()
    checks.append(
        check(
            "no Pod sandbox (network namespace) of this run is left",
            not sandboxes and bool(made),
            ", ".join(sandboxes) or f"{len(made)} sandbox(es) made by this run, all removed",
        )
    )
    leases = stack.cni.host_local_leases()
    checks.append(
        check(
            "the cluster network (ptp, host-local) holds no lease",
            not leases and stack.cni.host_local_dir.is_dir(),
            ", ".join(leases) or f"{stack.cni.host_local_dir} holds no lease",
        )
    )
    # A netns removed without DEL takes its veth pair with it, but the kernel does so asynchronously.
    links = poll("host veths of the sandboxes gone", stack.kubelet.leftover_host_links, NETNS_SETTLE_TIMEOUT)
    checks.append(
        check(
            "no host veth of this run's sandboxes is left",
            not links and bool(host_ends),
            ", ".join(links) or f"{len(host_ends)} host veth(s) reported by CNI ADD, all gone",
        )
    )
    cache = stack.cni.cache_files({sb.container_id for sb in made})
    checks.append(
        check(
            "no CNI cache file (cni-shim's, libcni's) of this run's containers is left",
            not cache and bool(made),
            ", ".join(cache) or f"none under {stack.cni.shim_cache} or {LIBCNI_CACHE_DIR}",
        )
    )
    return checks


STACK_DOWN_CHECK = "the stopped stack left no sandbox, veth, lease or CNI cache file of this run"


def stack_down_check(stack: Stack) -> Check:
    """After Stack.down(): what it found (and removed) of this run's sandboxes."""
    return check(STACK_DOWN_CHECK, not stack.left_behind, "; ".join(stack.left_behind))


def vfs_not_home(node: FakeNode) -> list[str]:
    """VFs not back on the host under their original name and MAC."""
    out = []
    for vf in node.vfs:
        link = host_link(vf.netdev)
        if link is None or link["address"] != vf.mac:
            out.append(f"{vf.netdev} ({vf.pci})")
    return out
