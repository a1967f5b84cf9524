"""deploy/helm/auto-sriov: `helm lint` passes, default values render exactly the kustomize install
(object by object, Helm's own labels aside), and each value reaches the field it names.

Rendered by the real helm and kubectl (scripts/build-tools helm kubectl); each test skips with the
build's reason when one is missing.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.deployment import BASE_DIR, OPERATOR_DIR
from tests.support.helm import (
    CHART_DIR,
    HELM_LABELS,
    hooks,
    installed,
    kustomize,
    render_chart,
    run_helm,
    without_helm_labels,
)

Key = tuple[str, str, str]


def keyed(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for obj in objects:
        key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        assert key not in out, f"rendered twice: {key}"
        out[key] = obj
    return out


def pod_spec(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (obj,) = [
        o for o in objects if o["kind"] in {"DaemonSet", "Deployment"} and o["metadata"]["name"] == name
    ]
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("operator", [False, True], ids=["deploy", "deploy-operator"])
def test_default_values_render_exactly_the_kustomize_install(helm, kubectl, operator) -> None:
    if operator:
        chart = keyed(installed(render_chart(helm, "operator.enabled=true")))
        expected = keyed(kustomize(kubectl, OPERATOR_DIR))
    else:
        chart = keyed(installed(render_chart(helm)))
        expected = keyed(kustomize(kubectl, BASE_DIR))
    assert sorted(chart) == sorted(expected)
    differ: list[str] = []
    for key, want in expected.items():
        got = without_helm_labels(chart[key])
        if got != want:
            differ += difflib.unified_diff(
                yaml.safe_dump(want).splitlines(),
                yaml.safe_dump(got).splitlines(),
                str(key),
                "chart",
                lineterm="",
            )
    assert differ == [], "\n".join(differ)
    # Helm's labels are on every object's metadata but the CRDs (shipped byte for byte) and never
    # on a Pod template, so a chart upgrade alone rolls no DaemonSet.
    for key, obj in chart.items():
        labels = set(obj["metadata"].get("labels", {}))
        assert (labels >= HELM_LABELS) is (key[0] != "CustomResourceDefinition"), key
        template = obj.get("spec", {}).get("template", {}).get("metadata", {})
        assert not HELM_LABELS & set(template.get("labels", {})), key


@pytest.mark.parametrize(
    "sets",
    [(), ("operator.enabled=true",), ("cni.mode=thin", "driver.multusAutoAttach=true")],
    ids=["defaults", "operator", "thin"],
)
def test_helm_lint_passes_strictly(helm, sets) -> None:
    flags = [f for s in sets for f in ("--set", s)]
    out = run_helm(helm, "lint", "--strict", str(CHART_DIR), *flags)
    assert out.returncode == 0, out.stdout + out.stderr


def test_each_component_is_a_toggle(helm) -> None:
    def kinds_names(*sets: str) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in render_chart(helm, *sets)}

    everything = kinds_names("operator.enabled=true")
    no_driver = kinds_names("operator.enabled=true", "driver.enabled=false")
    no_cni = kinds_names("cni.enabled=false")
    no_crds = kinds_names("crds.install=false", "namespaces.create=false")
    assert not [n for k, n in no_driver if "dra-driver" in n or n == "dra-driver-sriov"]
    assert ("Deployment", "sriov-network-operator") in no_driver
    assert not [n for k, n in no_cni if "cni" in n and k != "CustomResourceDefinition"]
    assert ("DaemonSet", "sriov-dra-driver") in no_cni
    assert not [k for k, _ in no_crds if k in {"CustomResourceDefinition", "Namespace"}]
    operator_crds = {
        n for k, n in everything if k == "CustomResourceDefinition" and n.endswith("openshift.io")
    }
    assert len(operator_crds) == 4
    assert not operator_crds & {n for _, n in kinds_names()}


def test_health_ports_move_the_probes_and_zero_turns_them_off(helm) -> None:
    probes = ("startupProbe", "livenessProbe", "readinessProbe")
    moved = render_chart(helm, "driver.healthcheckPort=6000", "cni.healthPort=6001")
    (driver,) = pod_spec(moved, "sriov-dra-driver")["containers"]
    assert env_of(driver)["HEALTHCHECK_PORT"] == "6000"
    assert {driver[p]["grpc"]["port"] for p in probes} == {6000}
    (daemon,) = pod_spec(moved, "cni-shim")["containers"]
    assert daemon["args"][-2:] == ["--health-address", "$(POD_IP):6001"]
    assert {daemon[p]["httpGet"]["port"] for p in probes} == {6001}
    off = render_chart(helm, "driver.healthcheckPort=0", "cni.healthPort=0")
    (driver,) = pod_spec(off, "sriov-dra-driver")["containers"]
    assert env_of(driver)["HEALTHCHECK_PORT"] == "-1"
    (daemon,) = pod_spec(off, "cni-shim")["containers"]
    assert "--health-address" not in daemon["args"]
    assert not [p for p in probes if p in driver or p in daemon]


def test_uninstall_is_checked_first_by_a_minimal_pre_delete_hook(helm) -> None:
    found = hooks(render_chart(helm))
    assert {(o["kind"], o["metadata"]["name"]) for o in found} == {
        (kind, "sriov-dra-uninstall-check")
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job")
    }
    for obj in found:
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-delete"
        # A refused uninstall keeps the Job's log; the next attempt replaces it, a pass deletes it.
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    by_kind = {o["kind"]: o for o in found}
    weights = {k: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for k, o in by_kind.items()}
    assert max(w for k, w in weights.items() if k != "Job") < weights["Job"]  # RBAC before the Job
    rules = by_kind["ClusterRole"]["rules"]
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in rules] == [
        (["k8s.cni.cncf.io"], ["network-attachment-definitions"], ["list"]),
        (["resource.k8s.io"], ["resourceclaims"], ["list"]),
    ]
    job = by_kind["Job"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    assert container["command"] == ["sriov-dra", "uninstall-check"]
    assert container["image"] == pod_spec(render_chart(helm), "sriov-dra-driver")["containers"][0]["image"]
    assert (
        job["backoffLimit"] == 0
        and job["template"]["spec"]["serviceAccountName"] == "sriov-dra-uninstall-check"
    )
    assert hooks(render_chart(helm, "uninstallCheck.enabled=false")) == []
    assert hooks(render_chart(helm, "driver.enabled=false")) == []


def test_values_reach_the_fields_they_name(helm) -> None:
    digest = "sha256:" + "ab" * 32
    objects = render_chart(
        helm,
        "driver.image.tag=0.2.0",
        f"cni.image.digest={digest}",
        "cni.image.pullPolicy=Never",
        "driver.nodeSelector.rail=a",
        "driver.tolerations=null",
        "driver.resources.limits.memory=1Gi",
        "driver.metricsPort=0",
        "driver.multusAutoAttach=true",
        "cni.metricsPort=9191",
        "cni.logLevel=debug",
    )
    driver = pod_spec(objects, "sriov-dra-driver")
    (container,) = driver["containers"]
    assert container["image"] == "ghcr.io/auto-sriov/sriov-dra-driver:0.2.0"
    assert driver["nodeSelector"] == {"kubernetes.io/os": "linux", "rail": "a"}
    assert "tolerations" not in driver
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    assert "ports" not in container
    assert env_of(container)["METRICS_PORT"] == "-1"
    assert env_of(container)["MULTUS_AUTO_ATTACH"] == "true"
    cni = pod_spec(objects, "cni-shim")
    for c in cni["initContainers"] + cni["containers"]:
        assert c["image"] == f"ghcr.io/auto-sriov/cni-shim@{digest}"
        assert c["imagePullPolicy"] == "Never"
    assert cni["containers"][0]["ports"] == [{"name": "metrics", "containerPort": 9191, "protocol": "TCP"}]
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    daemon = yaml.safe_load(config["data"]["daemon-config.json"])
    assert (daemon["metricsPort"], daemon["logLevel"]) == (9191, "debug")


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (("cni.mode=thinnest",), "at '/cni/mode'"),
        (("driver.metricsPort=70000",), "at '/driver/metricsPort'"),
        (("driver.image.digest=latest",), "at '/driver/image/digest'"),
        (("drivr.enabled=false",), "additional properties 'drivr' not allowed"),
    ],
)
def test_the_values_schema_refuses_what_would_render_a_broken_install(helm, sets, complaint) -> None:
    flags = [f for s in sets for f in ("--set", s)]
    out = run_helm(helm, "template", "auto-sriov", str(CHART_DIR), *flags)
    assert out.returncode != 0
    assert complaint in out.stderr, out.stderr


def test_kubectl_kustomize_builds_the_operator_overlay_where_it_stands(kubectl) -> None:
    assert kustomize(kubectl, OPERATOR_DIR)


def test_the_chart_ships_deploy_crds_through_links_not_copies() -> None:
    for link, target in (("crds", BASE_DIR / "crds"), ("operator-crds", OPERATOR_DIR / "crds")):
        path: Path = CHART_DIR / "files" / link
        assert path.is_symlink() and path.resolve() == target.resolve()
