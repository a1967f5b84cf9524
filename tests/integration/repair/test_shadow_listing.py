"""The orphan scan's shadow listing (sriov_dra.kube.resources.KubeShadowLister) on the real API server: one
list request, decoded while it streams in, narrowed by the managed-by and node-UID labels."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client
from kubernetes import config as kube_config

import sriov_dra.kube.transport
from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from sriov_dra.apierrors import ApiError
from sriov_dra.kube.resources import KubeShadowLister
from testbed import faults

pytestmark = pytest.mark.integration

NAD = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"


def put(testbed, ns: str, name: str, labels: dict[str, str]) -> None:
    body = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "labels": labels},
        # multi-byte text too: a chunk boundary may fall inside a character
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": name, "note": "rail ä€𝄞"})},
    }
    client.CustomObjectsApi(testbed.api_client).create_namespaced_custom_object(*NAD, ns, NADS, body)


def test_every_labelled_shadow_of_the_node_comes_whole_out_of_a_streamed_list(
    testbed, k8s_namespace, monkeypatch
) -> None:
    node_uid, other_uid = str(uuid.uuid4()), str(uuid.uuid4())
    mine = {f"s{i:02d}": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NODE_UID_LABEL: node_uid} for i in range(40)}
    others = {
        "other-node": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NODE_UID_LABEL: other_uid},
        "unmanaged": {NODE_UID_LABEL: node_uid},
        "no-labels": {},
    }
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: put(testbed, k8s_namespace, *kv), [*mine.items(), *others.items()]))
    # small reads: most items span two reads and many reads split a multi-byte character
    monkeypatch.setattr(sriov_dra.kube.transport, "STREAM_CHUNK", 1000)

    listed = list(KubeShadowLister(testbed.api_client).list_shadows(node_uid))

    assert sorted(o["metadata"]["name"] for o in listed) == sorted(mine)
    for obj in listed:
        config = json.loads(obj["spec"]["config"])
        assert (config["name"], config["note"]) == (obj["metadata"]["name"], "rail ä€𝄞")
        assert obj["metadata"]["uid"] and obj["metadata"]["namespace"] == k8s_namespace


@pytest.mark.parametrize(
    ("fault", "status", "reason"),
    [
        (faults.forbidden(), 403, "AccessDenied"),
        (faults.internal_error(), 500, "ApiRequestFailed"),
        (faults.reset(), 0, "ApiRequestFailed"),
    ],
)
def test_a_failed_list_is_a_reasoned_api_error(testbed, fault_proxy, fault, status, reason) -> None:
    proxy = fault_proxy("driver")
    proxy.add_rule(fault, verb="list", resource=NADS)
    api = kube_config.new_client_from_config(config_file=str(proxy.kubeconfig))
    try:
        with pytest.raises(ApiError) as err:
            list(KubeShadowLister(api).list_shadows(str(uuid.uuid4())))
    finally:
        api.close()
    assert (err.value.status, err.value.reason) == (status, reason)
    assert "NetworkAttachmentDefinitions (managed shadows)" in err.value.message
