"""The daemon's NAD cache on the real API server (issue 34): every unmanaged NAD and this node's
shadows, never another node's, with the label selectors the API server really applies (`!=`
also selects a NAD without the label); a shadow that becomes this node's arrives by watch."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from testbed.cni_objects import create_nad
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration]

OTHER_NODE_UID = "9d1c0f00-aaaa-4bbb-8ccc-ddddeeeeffff"
CONFIG = json.dumps({"cniVersion": "1.0.0", "name": "n", "type": "sriov"})


def nad(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"config": CONFIG}}


def shadow_labels(node_uid: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NODE_UID_LABEL: node_uid}


def test_the_daemon_holds_unmanaged_nads_and_its_own_nodes_shadows_only(
    testbed, k8s_namespace, cni_daemon, tmp_path
):
    api, ns = testbed.api_client, k8s_namespace
    node = client.CoreV1Api(api).read_node(testbed.node_name)
    assert node.metadata is not None
    mine = str(node.metadata.uid)
    create_nad(api, ns, nad("plain", {}))
    create_nad(api, ns, nad("someone-elses", {MANAGED_BY_LABEL: "another-manager"}))
    create_nad(api, ns, nad("dra-sriov-mine", shadow_labels(mine)))
    create_nad(api, ns, nad("dra-sriov-theirs", shadow_labels(OTHER_NODE_UID)))
    daemon = cni_daemon({"cniDir": str(tmp_path / "cache")})

    def held() -> set[str]:
        return {key.split("/", 1)[1] for key in daemon.informers()["nad"] if key.startswith(f"{ns}/")}

    assert held() == {"plain", "someone-elses", "dra-sriov-mine"}
    # Relabelled to this node (as a rebuilt node's shadows could be): the shadow watch brings it.
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions", "dra-sriov-theirs",
        {"metadata": {"labels": {NODE_UID_LABEL: mine}}},
    )  # fmt: skip
    wait_for(lambda: "dra-sriov-theirs" in held(), 20, what="the relabelled shadow in the daemon's cache")
    # And a NAD that becomes a shadow of another node leaves the unmanaged watch.
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions", "plain",
        {"metadata": {"labels": shadow_labels(OTHER_NODE_UID)}},
    )  # fmt: skip
    wait_for(
        lambda: "plain" not in held(), 20, what="the NAD turned another node's shadow to leave the cache"
    )
