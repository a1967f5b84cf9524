"""The extra CNI ADD latency of resourceName networks: cni-shim thin vs Multus thin, in one run.

    python -m bench.resource_name [--cycles 40] [--warmup 3]

bench.thick_compare's Pod, two NADs and real delegates (ptp + host-local), twice: once plain and
once with both NADs annotated ``k8s.v1.cni.cncf.io/resourceName`` and the Pod holding two devices
of that resource in a stand-in for the kubelet's pod-resources API (ptp ignores the deviceID both
inject). Multus asks only its fixed ``/var/lib/kubelet/pod-resources/kubelet.sock``, so each
Multus invocation runs in a private mount namespace whose /var/lib is the bench's own (the
machine's kubelet paths are never touched; the plain Multus setup pays the same wrapper);
cni-shim is told the socket (``podResourcesSocket``); its thin host shim has no gRPC and reads the
kubelet's checkpoint instead, so the bench writes one with the same allocation
(``deviceCheckpointFile``). Each plugin's extra ADD latency is its ADD
median with the annotation minus its ADD median without; the four setups take turns, their order
rotated each cycle. Needs root and the built tools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import shutil
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from kubernetes import client

from bench.common import network_namespace, standalone
from bench.thick_compare import CID, MULTUS_RULES, NADS, Setup, _identity, ptp, workload
from cni_shim import launcher
from cni_shim.node.gen import podresources_v1_pb2 as pb
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON_RULES
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

# Under the bench's own /var/lib stand-in: Multus's fixed path once that is mounted on /var/lib.
SOCKET_UNDER_VARLIB = Path("kubelet/pod-resources/kubelet.sock")
RESOURCE = "bench.example/vfs"
DEVICES = ["0000:fe:00.2", "0000:fe:00.1"]  # no such functions: the device gate finds no VF


@contextlib.contextmanager
def pod_resources(socket: Path, namespace: str, pod: str) -> Iterator[None]:
    """The kubelet's pod-resources List on ``socket``, answering that ``pod`` holds DEVICES of RESOURCE."""
    socket.parent.mkdir(parents=True, exist_ok=True)
    answer = pb.ListPodResourcesResponse(
        pod_resources=[
            pb.PodResources(
                name=pod,
                namespace=namespace,
                containers=[
                    pb.ContainerResources(
                        name="c", devices=[pb.ContainerDevices(resource_name=RESOURCE, device_ids=DEVICES)]
                    )
                ],
            )
        ]
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "v1.PodResourcesLister",
                {
                    "List": grpc.unary_unary_rpc_method_handler(
                        lambda _req, _ctx: answer,
                        request_deserializer=pb.ListPodResourcesRequest.FromString,
                        response_serializer=pb.ListPodResourcesResponse.SerializeToString,
                    )
                },
            ),
        )
    )
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield
    finally:
        server.stop(None).wait()
        socket.unlink(missing_ok=True)


def in_private_varlib(binary: Path, varlib: Path, wrapper: Path) -> Path:
    """A script that runs ``binary`` (stdin, env and exit status its own) in a private mount
    namespace where ``varlib`` is mounted on /var/lib."""
    wrapper.write_text(
        "#!/bin/sh\n"
        "exec unshare --mount --propagation private sh -c "
        f"'mount --bind {varlib} /var/lib && exec {binary}'\n"
    )
    wrapper.chmod(0o755)
    return wrapper


def _annotate(bed: TestBed, namespace: str) -> None:
    for name in NADS:
        client.CustomObjectsApi(bed.api_client).patch_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            namespace,
            "network-attachment-definitions",
            name,
            {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/resourceName": RESOURCE}}},
        )


def measure(bed: TestBed, tools: ToolSet, work: Path, cycles: int, warmup: int) -> dict[str, Any]:
    multus_dir = tools.require("multus")
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    launcher.install(bin_dir / "cni-shim")
    shutil.copy(multus_dir / "multus", bin_dir / "multus")
    tag = secrets.token_hex(2)
    primary = ptp("podnet", "10.90.0.0/24", work / "ipam")
    args: dict[str, str] = {}
    uids: dict[str, str] = {}
    namespaces = []
    for kind in ("plain", "resource"):
        ns = f"bench-rn-{kind}-{tag}"
        pod, uid = workload(bed, ns, work / f"ipam-{kind}")
        namespaces.append(ns)
        uids[kind] = uid
        args[kind] = (
            f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};"
            f"K8S_POD_INFRA_CONTAINER_ID={CID};K8S_POD_UID={uid}"
        )
    _annotate(bed, namespaces[1])
    checkpoint = work / "kubelet_internal_checkpoint"
    entry = {
        "PodUID": uids["resource"],
        "ContainerName": "c",
        "ResourceName": RESOURCE,
        "DeviceIDs": {"0": DEVICES},
    }
    checkpoint.write_text(
        json.dumps({"Data": {"PodDeviceEntries": [entry], "RegisteredDevices": {}}, "Checksum": 0})
    )
    setups: list[tuple[Setup, str]] = []
    varlib = work / "varlib"
    socket = varlib / SOCKET_UNDER_VARLIB
    binaries = {
        "cni-shim": bin_dir / "cni-shim",
        "multus": in_private_varlib(bin_dir / "multus", varlib, work / "multus-in-varlib"),
    }
    for plugin, rules in (("cni-shim", DAEMON_RULES), ("multus", MULTUS_RULES)):
        for kind in ("plain", "resource"):
            user = f"bench-rn-{plugin}-{kind}-{tag}"
            conf = {
                "cniVersion": "1.0.0",
                "name": "multus-cni-network",
                "type": plugin,
                "binDir": str(bin_dir),
                "delegates": [primary],
                "cniDir": str(work / f"{plugin}-{kind}-cache"),
                "kubeconfig": str(_identity(bed, user, rules)),
            }
            if plugin == "cni-shim":
                conf["podResourcesSocket"] = str(socket)
                conf["deviceCheckpointFile"] = str(checkpoint)
            setups.append((Setup(f"{plugin} {kind}", binaries[plugin], conf, user), args[kind]))
    with network_namespace() as netns, pod_resources(socket, namespaces[1], "bench"):
        for round_ in range(warmup + cycles):
            # Rotated each cycle: no setup always runs after the same other one.
            for setup, pod_args in setups[round_ % len(setups) :] + setups[: round_ % len(setups)]:
                setup.run("ADD", netns, pod_args, bin_dir)
                setup.run("DEL", netns, pod_args, bin_dir)
                if round_ < warmup:
                    setup.windows.clear()
    for ns in namespaces:
        client.CoreV1Api(bed.api_client).delete_namespace(ns)
    add = {setup.label: round(setup.per_verb()["ADD_median"], 2) for setup, _ in setups}
    extra = {
        plugin: round(add[f"{plugin} resource"] - add[f"{plugin} plain"], 2)
        for plugin in ("cni-shim", "multus")
    }
    return {"cycles": cycles, "add_median_ms": add, "extra_add_ms": extra}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    opts = parser.parse_args(argv)
    return standalone(
        "bench-rn-",
        lambda bed, tools, work: print(
            json.dumps(measure(bed, tools, work, opts.cycles, opts.warmup), indent=2)
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
