"""A managed shadow NAD as the driver makes it (spec 6.4), with the Pod's generated selection and
registry entry naming it, all mutually consistent: for suites that play the driver's part by hand
(testbed/cni_objects.py) and for the CNI guard's unit tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sriov_contract import keys
from sriov_contract.identity import config_sha256, shadow_name_for

POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "22222222-3333-4444-5555-666666666666"
NODE_UID = "33333333-4444-5555-6666-777777777777"
SOURCE_UID = "44444444-5555-6666-7777-888888888888"
SHADOW_UID = "55555555-6666-7777-8888-999999999999"


def rendered_sriov_config(pci: str, name: str = "rail-a", **extra: Any) -> str:
    """A static sriov config as the driver renders it (compact, exact bytes)."""
    conf = {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "sriov",
        "deviceID": pci,
        "ipam": {"type": "static", "addresses": [{"address": "192.0.2.10/24"}]},
        **extra,
    }
    return json.dumps(conf, separators=(",", ":"))


def managed_shadow(
    *,
    namespace: str,
    pod_name: str,
    pod_uid: str = POD_UID,
    node: str = "node-a",
    pci: str = "0000:03:00.1",
    interface: str = "dra0",
    seed: str = "a",
    config: str | None = None,
    shadow_uid: str = SHADOW_UID,
    node_uid: str = NODE_UID,
) -> dict[str, Any]:
    """A shadow NAD, its generated selection and registry entry, all mutually consistent."""
    attachment_id = hashlib.sha256(seed.encode()).hexdigest()
    name = shadow_name_for(attachment_id)
    text = config if config is not None else rendered_sriov_config(pci)
    digest = config_sha256(text.encode())
    binding = {
        "version": 1,
        "attachmentID": attachment_id,
        "podUID": pod_uid,
        "claimUID": CLAIM_UID,
        "nodeName": node,
        "nodeUID": node_uid,
        "source": {"namespace": namespace, "name": "rail-a-net", "uid": SOURCE_UID, "resourceVersion": "7"},
        "pciAddress": pci,
        "interface": interface,
        "configSHA256": digest,
    }
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": shadow_uid,
            "labels": keys.shadow_labels(pod_uid, CLAIM_UID, node_uid),
            "annotations": {keys.BINDING_ANNOTATION: json.dumps(binding, separators=(",", ":"))},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod_uid,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": [keys.PROTECTION_FINALIZER],
        },
        "spec": {"config": text},
    }
    entry = {
        "attachmentID": attachment_id,
        "claimUID": CLAIM_UID,
        "namespace": namespace,
        "name": name,
        "uid": shadow_uid,
        "interface": interface,
        "configSHA256": digest,
    }
    return {
        "nad": nad,
        "name": name,
        "selection": {"name": name, "namespace": namespace, "interface": interface},
        "entry": entry,
    }


def registry_annotation(pod_uid: str, entries: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"version": 1, "podUID": pod_uid, "entries": list(entries)}, separators=(",", ":"))
