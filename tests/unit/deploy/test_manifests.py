"""Static checks of deploy/: what the kustomization ships, who may do what, and how each DaemonSet
meets the node. The API server's own verdict on the same files is in tests/integration/deploy."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from testbed.deployment import BASE_DIR, CNI_NAMESPACE, CNI_SA, DEPLOY_DIR, DRIVER_NAMESPACE, DRIVER_SA
from tests.support.deploy import CNI_NEEDS, DRIVER_NEEDS, Permission, deploy_objects, kustomization_resources

CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "DeviceClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return deploy_objects()


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def pod_spec(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = find(objects, "DaemonSet", name)["spec"]["template"]["spec"]
    return spec


def granted(objects: list[dict[str, Any]], namespace: str, account: str) -> set[Permission]:
    """Every (verb, resource) the manifests bind to this ServiceAccount, expanded rule by rule."""
    out: set[Permission] = set()
    for binding in (o for o in objects if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}):
        subjects = binding["subjects"]
        if not any(
            s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == (namespace, account)
            for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        role = find(objects, ref["kind"], ref["name"])
        scope = role["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        for rule in role["rules"]:
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    base, _, sub = resource.partition("/")
                    out |= {Permission(v, group, base, sub, scope) for v in rule["verbs"]}
    return out


def test_the_kustomization_lists_every_manifest_and_only_existing_files() -> None:
    listed = kustomization_resources()
    assert all(p.is_file() for p in listed), [str(p) for p in listed if not p.is_file()]
    # deploy/operator/ is an overlay with its own kustomization (tests/unit/deploy/test_operator_manifests.py);
    # deploy/helm/ is the Helm chart (tests/unit/deploy/test_helm_chart.py).
    on_disk = {p for p in BASE_DIR.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(listed) == on_disk, f"unlisted: {on_disk - set(listed)}; missing: {set(listed) - on_disk}"
    assert listed[: len(list((BASE_DIR / "crds").glob("*.yaml")))] == [
        p for p in listed if p.parent.name == "crds"
    ], "CRDs come first so that a plain apply of the list in order works"


def test_the_release_image_hooks_name_exactly_the_images_the_daemonsets_run(objects) -> None:
    kustomization = yaml.safe_load((BASE_DIR / "kustomization.yaml").read_text())
    hooks = {i["name"] for i in kustomization["images"]}
    used = {
        c["image"].rsplit(":", 1)[0]
        for ds in objects
        if ds["kind"] == "DaemonSet"
        for c in ds["spec"]["template"]["spec"].get("initContainers", [])
        + ds["spec"]["template"]["spec"]["containers"]
    }
    assert hooks == used


def test_every_object_is_complete_and_namespaced_objects_use_our_namespaces(objects) -> None:
    namespaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    assert namespaces == {DRIVER_NAMESPACE, CNI_NAMESPACE}
    seen = set()
    for obj in objects:
        assert {"apiVersion", "kind", "metadata"} <= obj.keys()
        key = (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        assert key not in seen, f"duplicate {key}"
        seen.add(key)
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], key
        else:
            assert obj["metadata"].get("namespace") in namespaces, key


@pytest.mark.parametrize(
    ("namespace", "account", "needs"),
    [(DRIVER_NAMESPACE, DRIVER_SA, DRIVER_NEEDS), (CNI_NAMESPACE, CNI_SA, CNI_NEEDS)],
    ids=["driver", "cni"],
)
def test_each_service_account_is_granted_exactly_what_it_needs(objects, namespace, account, needs) -> None:
    assert find(objects, "ServiceAccount", account)["metadata"]["namespace"] == namespace
    got = granted(objects, namespace, account)
    assert got - needs == set(), f"granted beyond need: {sorted(got - needs)}"
    assert needs - got == set(), f"needed but not granted: {sorted(needs - got)}"


def test_no_rule_uses_wildcards(objects) -> None:
    for role in (o for o in objects if o["kind"] in {"Role", "ClusterRole"}):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{role['metadata']['name']}: wildcard in {field}"


def test_each_daemonset_runs_as_its_own_service_account(objects) -> None:
    assert pod_spec(objects, "sriov-dra-driver")["serviceAccountName"] == DRIVER_SA
    assert pod_spec(objects, "cni-shim")["serviceAccountName"] == CNI_SA


def test_only_the_two_node_agents_are_privileged(objects) -> None:
    privileged = set()
    for ds in (o for o in objects if o["kind"] == "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        for container in spec.get("initContainers", []) + spec["containers"]:
            ctx = container.get("securityContext", {})
            if ctx.get("privileged"):
                privileged.add((ds["metadata"]["name"], container["name"]))
            else:
                assert ctx.get("allowPrivilegeEscalation") is False, container["name"]
                assert ctx.get("capabilities", {}).get("drop") == ["ALL"], container["name"]
    assert privileged == {("sriov-dra-driver", "driver"), ("cni-shim", "daemon")}


def host_mounts(spec: dict[str, Any], container: str) -> dict[str, str]:
    """Container mount path -> host path, for hostPath volumes."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    (c,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == container]
    out = {}
    for mount in c["volumeMounts"]:
        assert mount["name"] in volumes, f"{container}: mount of undefined volume {mount['name']}"
        if "hostPath" in volumes[mount["name"]]:
            out[mount["mountPath"]] = volumes[mount["name"]]["hostPath"]["path"]
    return out


def host_path_of(mounts: dict[str, str], container_path: str) -> str | None:
    """The host path behind ``container_path``, through the deepest enclosing hostPath mount."""
    for mount in sorted(mounts, key=len, reverse=True):
        if container_path == mount or container_path.startswith(mount.rstrip("/") + "/"):
            return mounts[mount] + container_path[len(mount) :]
    return None


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_the_driver_sees_kubelet_cdi_sysfs_and_its_checkpoint_on_the_host(objects) -> None:
    spec = pod_spec(objects, "sriov-dra-driver")
    mounts = host_mounts(spec, "driver")
    env = env_of(spec["containers"][0])
    for container_path in (
        env["KUBELET_REGISTRAR_DIRECTORY_PATH"],
        env["KUBELET_PLUGINS_DIRECTORY_PATH"],
        # The checkpoint lives in the plugin's own directory and must survive restarts.
        env["KUBELET_PLUGINS_DIRECTORY_PATH"] + "/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json",
        env["CDI_ROOT"],
        env["SYSFS_ROOT"] + "/bus/pci/devices",
    ):
        assert host_path_of(mounts, container_path) == container_path, container_path
    assert spec["hostNetwork"] is True, "netdev names in sysfs are per network namespace"


def test_the_driver_reads_every_variable_its_daemonset_sets(objects) -> None:
    from sriov_dra.main import cli  # noqa: PLC0415 - only this test needs the driver's CLI

    declared = {p.envvar for p in cli.params if isinstance(p.envvar, str)}
    env = env_of(pod_spec(objects, "sriov-dra-driver")["containers"][0])
    assert {name for name in env if not name.startswith("PYTHON")} <= declared


PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


def test_the_driver_probes_ask_its_health_endpoint_for_the_right_service(objects) -> None:
    (container,) = pod_spec(objects, "sriov-dra-driver")["containers"]
    port = int(env_of(container)["HEALTHCHECK_PORT"])
    asked = {probe: container[probe]["grpc"] for probe in PROBES}
    assert asked == {
        "startupProbe": {"port": port, "service": "liveness"},
        "livenessProbe": {"port": port, "service": "liveness"},
        "readinessProbe": {"port": port, "service": "readiness"},
    }
    assert_patient(container)


def test_the_cni_probes_ask_the_address_the_daemon_serves_them_on(objects) -> None:
    (container,) = pod_spec(objects, "cni-shim")["containers"]
    args = container["args"]
    port = int(args[args.index("--health-address") + 1].rpartition(":")[2])
    asked = {probe: container[probe]["httpGet"] for probe in PROBES}
    assert asked == {
        "startupProbe": {"path": "/healthz", "port": port},
        "livenessProbe": {"path": "/healthz", "port": port},
        "readinessProbe": {"path": "/readyz", "port": port},
    }
    assert_patient(container)


def assert_patient(container: dict[str, Any]) -> None:
    """A healthy agent under load is never restarted: a probe gets 10 s or more (the checks' own
    deadlines are shorter), and a restart takes a minute of failures in a row."""
    for probe in PROBES:
        assert container[probe]["timeoutSeconds"] >= 10, probe
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= 60


def test_multus_auto_attach_is_a_single_opt_in_that_defaults_off() -> None:
    # The Helm chart's single opt-in is its value driver.multusAutoAttach (tests/unit/deploy/test_helm_chart.py).
    manifests = [p for p in DEPLOY_DIR.rglob("*.yaml") if DEPLOY_DIR / "helm" not in p.parents]
    hits = [(p.name, line) for p in manifests for line in p.read_text().splitlines()]
    named = [h for h in hits if "MULTUS_AUTO_ATTACH" in h[1] and not h[1].lstrip().startswith("#")]
    assert named == [("driver-daemonset.yaml", "            - name: MULTUS_AUTO_ATTACH")]
    env = env_of(pod_spec(deploy_objects(), "sriov-dra-driver")["containers"][0])
    assert env["MULTUS_AUTO_ATTACH"] == "false"
    assert env["CONFIGURATION_MODE"] == "MULTUS"


def daemon_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(
        find(objects, "ConfigMap", "cni-shim-daemon-config")["data"]["daemon-config.json"]
    )
    return config


def test_the_cni_daemon_reads_live_and_keeps_its_caches_on_the_host(objects) -> None:
    config = daemon_config(objects)
    assert config["liveNetworkConfigOnAdd"] is True
    spec = pod_spec(objects, "cni-shim")
    mounts = host_mounts(spec, "daemon")
    # DEL works from these caches when every API object is gone: ours and sriov-cni's.
    for cache in (config["cniDir"], "/var/lib/cni/sriov"):
        assert host_path_of(mounts, cache) == cache, cache
    assert host_path_of(mounts, config["chrootDir"]) == "/"
    (volume,) = [v for v in spec["volumes"] if v.get("configMap", {}).get("name") == "cni-shim-daemon-config"]
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    args = spec["containers"][0]["args"]
    assert args[args.index("--config") + 1] == f"{mount['mountPath']}/daemon-config.json"


def test_the_host_shim_dials_the_socket_the_daemon_serves(objects) -> None:
    spec = pod_spec(objects, "cni-shim")
    served = host_path_of(host_mounts(spec, "daemon"), daemon_config(objects)["socketDir"])
    (init,) = spec["initContainers"]
    assert served is not None
    assert served.rstrip("/") == env_of(init)["DAEMON_SOCKET_DIR"].rstrip("/")
    install = host_mounts(spec, "install-shim")
    assert host_path_of(install, env_of(init)["HOST_CNI_CONF_DIR"]) == env_of(init)["CNI_CONF_DIR"]
    assert host_path_of(install, env_of(init)["HOST_CNI_BIN_DIR"]) == daemon_config(objects)["binDir"]


def test_no_namespace_allowlist_anywhere(objects) -> None:
    """Workload and source namespaces are open; only RBAC decides (spec 4.2)."""
    keys: set[str] = set(daemon_config(objects))
    for ds in (o for o in objects if o["kind"] == "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        for container in spec.get("initContainers", []) + spec["containers"]:
            keys |= set(env_of(container)) | set(container.get("args", []))
    suspicious = [k for k in keys if re.search(r"allow|namespaces|whitelist|watch.?namespace", k, re.I)]
    assert suspicious == []
    text = "\n".join(p.read_text() for p in DEPLOY_DIR.rglob("*.yaml") if p.parent.name != "crds")
    assert not re.search(r"allow-?list|namespaceIsolation|globalNamespaces", text, re.I)


def test_the_helpers_see_what_they_should() -> None:
    mounts = {"/host/run": "/run", "/var/lib/cni/multus": "/var/lib/cni/multus"}
    assert host_path_of(mounts, "/host/run/cni-shim/") == "/run/cni-shim/"
    assert host_path_of(mounts, "/host/runner") is None
    assert host_path_of(mounts, "/var/lib/cni/sriov") is None
    broad_role: list[dict[str, Any]] = [
        {"kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "n"}},
        {"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "delete"]}]},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "r"},
         "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "n"}]},
    ]  # fmt: skip
    assert Permission("delete", "", "pods", "status") in granted(broad_role, "n", "a")
    assert granted(broad_role, "n", "other") == set()
