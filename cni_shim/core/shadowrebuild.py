"""A DEL that lost its delegate cache after its Pod was deleted: the teardown the Pod's managed
shadows still describe.

The driver's protection finalizer keeps a Pod's shadows until it unprepares the claim, which the
kubelet does only after the sandbox's DEL, and each shadow carries the config the driver froze for
its VF (deviceID, IPAM) and, in its binding, the interface. So a DEL with neither cache nor Pod can
still run the sriov delegate the ADD ran: that plugin finds its own saved VF state by container ID
and interface, returns the VF to the host and has IPAM release the address (the handler runs the
cluster network before them, as ADD did). Only shadows the
guard accepts as the managed shadows of the Pod the runtime names are used
(cni_shim.core.guard.check_left_behind). Pure: the shadows come in as data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cni_shim.core import delegates
from cni_shim.core.delegates import Candidate
from cni_shim.core.guard import check_left_behind
from cni_shim.errors import CniError
from sriov_contract import keys
from sriov_contract.binding import Binding
from sriov_contract.networks import NetworkSelection
from sriov_lib.rawjson import JsonObject
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import ConfFiles

    Json = dict[str, Any]


def selector(pod_uid: str) -> str:
    """The label selector of one Pod's shadows (sriov_contract.keys.shadow_labels)."""
    return f"{keys.MANAGED_BY_LABEL}={keys.MANAGED_BY_VALUE},{keys.POD_UID_LABEL}={pod_uid}"


class Shadow(TypedTuple):
    nad: Json
    binding: Binding

    @property
    def name(self) -> str:
        return str((self.nad.get("metadata") or {}).get("name", ""))


class Found(TypedTuple):
    """The listed shadows: those to tear down, in a stable order, and those refused, with why."""

    usable: tuple[Shadow, ...]
    refused: tuple[tuple[str, CniError], ...]


def sort(nads: Iterable[Mapping[str, Any]], namespace: str, pod_name: str, pod_uid: str) -> Found:
    usable: list[Shadow] = []
    refused: list[tuple[str, CniError]] = []
    for nad in nads:
        meta = nad.get("metadata") or {}
        try:
            binding = check_left_behind(nad, namespace, pod_name, pod_uid)
        except CniError as exc:
            refused.append((f"{meta.get('namespace')}/{meta.get('name')}", exc))
            continue
        usable.append(Shadow(dict(nad), binding))
    # ADD ran them in the order of the Pod's networks annotation, which went with the Pod; VFs are
    # independent, so any fixed order tears them down alike.
    usable.sort(key=lambda s: (s.binding.interface, s.name))
    return Found(tuple(usable), tuple(refused))


def candidate(shadow: Shadow, conf_dir: str, files: ConfFiles) -> Candidate:
    """The delegate the shadow's selection gave ADD: its frozen config, on its bound interface."""
    meta = shadow.nad.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), shadow.name
    interface = shadow.binding.interface
    raw = JsonObject(name=name, namespace=namespace, interface=interface)
    selection = NetworkSelection(
        name=name,
        namespace=namespace,
        interface=interface,
        raw=raw,
    )
    what = f"NetworkAttachmentDefinition {namespace}/{name}"
    net = delegates.nad_network(shadow.nad, conf_dir, files, what)
    return delegates.candidate(net, selection, what, managed=True)._replace(
        bound_pci=shadow.binding.pci_address
    )
