"""A managed node agent over a sysfs tree, CDI dir, file checkpoint and the in-memory API."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.model import DRIVER_NAME
from sriov_dra.prepare.consumer import ConsumerResolver
from sriov_dra.prepare.host import HostDevices
from sriov_dra.prepare.managed import LiveConsumer, ManagedPreparer
from sriov_dra.prepare.plain import PlainPreparer
from sriov_dra.recovery.claimrepair import ClaimRepairer
from sriov_dra.recovery.listing import PassLister
from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import FileStorage, PreparedClaims
from sriov_dra.sysfs.discovery import discover
from sriov_dra.sysfs.vfdriver import SysfsVfDriver
from tests.fakes.kube_api import FakeApi, Obj
from tests.fakes.sysfs import add_pf

NODE = "node-a"
NODE_UID = "6b1f0e4e-1111-4222-8333-944455556666"
NS = "ai-workloads"
NAME_ATTR = f"{DRIVER_NAME}/netAttachDefName"
NS_ATTR = f"{DRIVER_NAME}/netAttachDefNamespace"
SOURCE_CONFIG = (
    '{"cniVersion":"1.0.0","name":"rail-a","type":"sriov","vlan":100,'
    '"ipam":{"type":"host-local","subnet":"10.56.217.0/24","rangeStart":"10.56.217.171"}}'
)


def vf_config(**params: Any) -> dict[str, Any]:
    return {
        "source": "FromClass",
        "requests": [],
        "opaque": {
            "driver": DRIVER_NAME,
            "parameters": {"apiVersion": f"{DRIVER_NAME}/v1alpha1", "kind": "VfConfig", **params},
        },
    }


class Claims:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def get_claim(self, namespace: str, name: str) -> Obj:
        obj = self.api.get("claims", namespace, name)
        if obj is None:
            raise ReasonedError("ClaimNotFound", f"claim {namespace}/{name} not found")
        return obj


class RecordingVfDriver(SysfsVfDriver):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, str, str]] = []

    def bind(self, bdf: str, driver: str) -> str:
        self.calls.append(("bind", bdf, driver))
        return super().bind(bdf, driver)

    def restore(self, bdf: str, original: str) -> None:
        self.calls.append(("restore", bdf, original))
        super().restore(bdf, original)


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        sysfs = tmp_path / "sys"
        add_pf(sysfs, "0000:17:00.0", "ens1f0", 3)
        self.inventory = discover(sysfs)
        self.cdi = CdiDir(tmp_path / "cdi")
        self.cdi.root.mkdir()
        self.api = FakeApi()
        self.vf_driver = RecordingVfDriver(sysfs)
        # device name -> policy attributes; absent = not advertised
        self.eligible: dict[str, dict[str, object]] = {n: {} for n in self.inventory}
        self.live_node_uid = NODE_UID
        self.sleeps: list[float] = []
        self.restart()

    def restart(self, checkpoint: PreparedClaims | None = None) -> None:
        """A new driver process on the node's files, or on `checkpoint` when given."""
        self.checkpoint = checkpoint or PreparedClaims(FileStorage(self.tmp / "checkpoint.json"))
        self.devices = HostDevices(
            node_name=NODE,
            inventory=self.inventory.get,
            checkpoint=self.checkpoint,
            cdi_specs=self.cdi,
            vf_driver=self.vf_driver,
        )
        # The plain NodeService on the same checkpoint: a driver that ran without --multus-auto-attach.
        self.plain = PlainPreparer(claims=Claims(self.api), devices=self.devices, checkpoint=self.checkpoint)
        self.service = ManagedPreparer(
            claims=Claims(self.api),
            devices=self.devices,
            resolver=ConsumerResolver(
                pods=self.api,
                claims=Claims(self.api),
                node_name=NODE,
                node_uid=NODE_UID,
                live_node_uid=lambda: self.live_node_uid,
            ),
            nads=self.api,
            pods=self.api,
            checkpoint=self.checkpoint,
            node_name=NODE,
            node_uid=NODE_UID,
            eligible_attributes=self.eligible.get,
            sleep=self.sleeps.append,
        )
        self.repair: ClaimRepairer[LiveConsumer] = ClaimRepairer(
            self.service, self.checkpoint, node_uid=NODE_UID
        )
        self.lister = PassLister(
            checkpoint=self.checkpoint,
            node_name=NODE,
            node_uid=NODE_UID,
            live_node_uid=lambda: self.live_node_uid,
            shadows=self.api,
            pods=self.api,
            claims=self.api,
            claim_reader=Claims(self.api),
        )

    # -- objects -------------------------------------------------------------------------------

    def source_nad(self, name: str = "rail-a", namespace: str = NS, config: str = SOURCE_CONFIG) -> Obj:
        return self.api.put(
            "nads",
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {"k8s.v1.cni.cncf.io/resourceName": "x/y"},
                    "labels": {"team": "a"},
                },
                "spec": {"config": config},
            },
        )

    def pod(self, name: str = "pod", claims: list[Obj] | None = None, **spec: Any) -> Obj:
        return self.api.put(
            "pods",
            {
                "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4())},
                "spec": {"nodeName": NODE, "resourceClaims": claims or [], **spec},
                "status": {},
            },
        )

    def claim(
        self,
        name: str,
        pod: Obj | None,
        devices: list[str],
        configs: list[Obj] | None = None,
        *,
        request: str = "vf",
        uid: str | None = None,
        extra_results: list[Obj] | None = None,
    ) -> ClaimRef:
        results = [{"request": request, "driver": DRIVER_NAME, "pool": NODE, "device": d} for d in devices]
        reserved = (
            [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]
            if pod
            else []
        )
        obj = self.api.put(
            "claims",
            {
                "metadata": {"namespace": NS, "name": name, "uid": uid or str(uuid.uuid4())},
                "status": {
                    "allocation": {
                        "devices": {"results": results + (extra_results or []), "config": configs or []}
                    },
                    "reservedFor": reserved,
                },
            },
        )
        return ClaimRef(NS, name, obj["metadata"]["uid"])

    def pod_with_claim(
        self, devices: list[str], configs: list[Obj] | None = None, name: str = "c"
    ) -> tuple[Obj, ClaimRef]:
        pod = self.pod(claims=[{"name": "vfs", "resourceClaimName": name}])
        return pod, self.claim(name, pod, devices, configs)

    # -- observations --------------------------------------------------------------------------

    def prepare(self, ref: ClaimRef) -> Any:
        return self.service.prepare([ref])[ref.uid]

    def unprepare(self, ref: ClaimRef) -> str:
        return self.service.unprepare([ref])[ref.uid]

    def live_pod(self, pod: Obj) -> Obj:
        return self.api.stored("pods", NS, pod["metadata"]["name"])

    def networks(self, pod: Obj) -> list[Obj]:
        text = (self.live_pod(pod)["metadata"].get("annotations") or {}).get("k8s.v1.cni.cncf.io/networks")
        return json.loads(text) if text else []

    def shadows(self) -> list[Obj]:
        return [
            o
            for (kind, _ns, name), o in self.api.objects.items()
            if kind == "nads" and name.startswith("dra-sriov-")
        ]

    def phases(self, claim_uid: str) -> list[str]:
        record = self.checkpoint.snapshot_claim(claim_uid)
        return [] if record is None else [str((d.managed_binding or {}).get("phase")) for d in record.devices]

    def hardware_calls(self) -> list[tuple[str, str, str]]:
        return list(self.vf_driver.calls)
