"""The bed's helpers do what tests rely on: server-side apply, namespaced grants, extra identities."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.access import FIELD_MANAGER
from testbed.bed import TestBed

pytestmark = pytest.mark.integration


def nad(ns: str, config: str) -> dict[str, object]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "applied", "namespace": ns},
        "spec": {"config": config},
    }


def test_apply_creates_then_updates_with_our_field_manager(testbed: TestBed, k8s_namespace: str) -> None:
    testbed.apply([nad(k8s_namespace, '{"v": 1}')])
    [updated] = testbed.apply([nad(k8s_namespace, '{"v": 2}')])
    got = client.CustomObjectsApi(testbed.api_client).get_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", k8s_namespace, "network-attachment-definitions", "applied"
    )
    assert isinstance(got, dict)
    assert got["spec"]["config"] == '{"v": 2}'
    assert got["metadata"]["resourceVersion"] == updated.metadata.resourceVersion
    assert {m["manager"] for m in got["metadata"]["managedFields"]} == {FIELD_MANAGER}


def test_namespaced_grant_allows_only_that_namespace(testbed: TestBed, k8s_namespace: str) -> None:
    kubeconfig = testbed.issue_identity("reader", "configmap-reader")
    assert kubeconfig.is_file()
    testbed.grant(
        "configmap-reader",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        namespace=k8s_namespace,
    )
    reader = testbed.client_for("reader")
    try:
        core = client.CoreV1Api(reader)
        assert core.list_namespaced_config_map(k8s_namespace).items is not None
        with pytest.raises(ApiException) as err:
            core.list_namespaced_config_map("default")
        assert err.value.status == 403
    finally:
        reader.close()
    assert testbed.audit.wait_for_count(1, user="configmap-reader", namespace="default", code=403)
