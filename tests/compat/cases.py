"""The compat cases: Multus's own unit tests re-expressed as black-box invocations, plus one case
per difference of issue #18. Values and names are ours; each case names the Multus test it
stands for. ``DELIBERATE`` lists where cni-shim differs on purpose (docs/compatibility.md lists
every entry); ``KNOWN`` the differences not fixed yet (strict xfails).
"""

from __future__ import annotations

import json
from typing import Any

from sriov_contract import keys
from tests.compat.model import (
    POD_ARGS,
    POD_ARGS_NO_UID,
    THICK,
    THIN,
    Case,
    Deliberate,
    Step,
    multus,
    rec,
    rec_list,
)

K8S = "pkg/k8sclient/k8sclient_test.go"
TYPES = "pkg/types/conf_test.go"
M020 = "pkg/multus/multus_cni020_test.go"
M040 = "pkg/multus/multus_cni040_test.go"
M100 = "pkg/multus/multus_cni100_test.go"
SERVER = "pkg/server/server_test.go"
THICK_CNI = "pkg/server/thick_cni_test.go"
GENERATOR = "pkg/server/config/generator_test.go"
MANAGER = "pkg/server/config/manager_test.go"
ISSUE = "issue #18"

NETS = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NET = "v1.multus-cni.io/default-network"
ADD_DEL = (Step("ADD"), Step("DEL"))
ADD_CHECK_DEL = (Step("ADD"), Step("CHECK"), Step("DEL"))


def r(name: str, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    """A recorder delegate; for 0.2.0 it answers a 0.2.0-shaped result (ip4), as a real plugin would."""
    if version == "0.2.0" and "result" not in extra:
        extra["result"] = {"ip4": {"ip": "10.7.0.5/24"}}
    return rec(name, version, **extra)


def rl(name: str, version: str = "1.0.0", plugins: int = 1) -> dict[str, object]:
    if version == "0.2.0":
        return rec_list(name, version, plugins, result={"ip4": {"ip": "10.7.1.5/24"}})
    return rec_list(name, version, plugins)


def two(version: str, **keys: object) -> dict[str, object]:
    """A multus config with two static recorder delegates, weave1 (master) and other1."""
    return multus(version, delegates=[r("weave1", version), r("other1", version)], **keys)


def one(version: str = "1.0.0", **keys: object) -> dict[str, object]:
    return multus(version, delegates=[r("podnet", version)], **keys)


def failing(command: str, code: int = 11, msg: str = "delegate said no") -> dict[str, Any]:
    return {"errors": {command: {"code": code, "msg": msg}}}


def _versions(version: str, source: str) -> list[Case]:
    """The tests each multus_cni0x0/100 file repeats for its CNI version."""
    v = version.replace(".", "")
    faulty_ns = (Step("ADD", netns="fsdadfad"),)
    return [
        Case(f"v{v}-executes-delegates", source, "executes delegates", two(version), ADD_DEL, kube=False),
        Case(
            f"v{v}-plugin-without-interface",
            source,
            "executes delegates (plugin without interface)",
            multus(
                version,
                delegates=[
                    rec(
                        "weave1",
                        version,
                        result={"ips": [{"address": "10.7.0.5/24", "version": "4"}]}
                        if version in ("0.3.1", "0.4.0")
                        else {"ips": [{"address": "10.7.0.5/24"}]},
                    ),
                    r("other1", version),
                ],
            )
            if version not in ("0.2.0",)
            else multus(
                version,
                delegates=[
                    rec("weave1", version, result={"ip4": {"ip": "10.7.0.5/24"}}),
                    r("other1", version),
                ],
            ),
            ADD_DEL,
            kube=False,
        ),
        Case(
            f"v{v}-faulty-netns",
            source,
            "executes delegates given faulty namespace",
            two(version),
            faulty_ns,
            kube=False,
            go_tail="no net namespace fsdadfad found: ",
        ),
        Case(
            f"v{v}-bad-json",
            source,
            "fails to load NetConf with bad json in CmdAdd/Del",
            two(version),
            (
                Step("ADD", stdin='{"cniVersion": "' + version + '", "name": "multus", "delegates": [}'),
                Step("DEL", stdin='{"cniVersion": "' + version + '", "name": "multus", "delegates": [}'),
            ),
            kube=False,
            go_tail="error unmarshall network config: ",
        ),
        Case(
            f"v{v}-cleanup-on-failure",
            source,
            "executes delegates and cleans up on failure",
            multus(version, delegates=[r("weave1", version), r("other1", version, **failing("ADD"))]),
            kube=False,
        ),
        Case(
            f"v{v}-cleanup-missing-name",
            source,
            "executes delegates and cleans up on failure with missing name field",
            multus(
                version,
                delegates=[r("weave1", version), {k: v for k, v in r("x", version).items() if k != "name"}],
            ),
            kube=False,
        ),
        Case(
            f"v{v}-kubernetes-networks",
            source,
            "executes delegates and kubernetes networks",
            one(version),
            ADD_DEL,
            pod={NETS: "net1,net2"},
            nads={"net1": r("net1", version), "net2": rl("net2", version, plugins=2)},
        ),
        Case(
            f"v{v}-delete-after-pod-removal",
            source,
            "executes kubernetes networks and delete it after pod removal",
            one(version),
            (Step("ADD"), Step(action="delete-pod"), Step("DEL")),
            pod={NETS: "net1"},
            nads={"net1": r("net1", version)},
        ),
        Case(
            f"v{v}-cluster-network",
            source,
            "executes clusterNetwork delegate",
            multus(version, clusterNetwork="{confdir}/10-cluster.conf", defaultNetworks=[]),
            ADD_DEL,
            pod={},
            files={"confdir/10-cluster.conf": json.dumps(r("cluster", version))},
        ),
        Case(
            f"v{v}-cache-in-datadir",
            source,
            "Verify the cache is created in dataDir",
            one(version),
            ADD_DEL,
            pod={NETS: "net1"},
            nads={"net1": r("net1", version)},
        ),
        Case(
            f"v{v}-delete-without-cache",
            source,
            "Delete pod without cache",
            one(version),
            (Step("DEL"),),
            pod={NETS: "net1"},
            nads={"net1": r("net1", version)},
        ),
    ]


def nets(*elements: dict[str, object]) -> str:
    """A JSON-form networks annotation."""
    return json.dumps(list(elements))


CLUSTER_NAD = {"cluster": r("cluster"), "net1": r("net1")}
WRONG_UID = POD_ARGS.replace("{uid}", "00000000-0000-4000-8000-000000000000")

K8S_CASES = [
    Case(
        "k-shorthand",
        K8S,
        "retrieves delegates from kubernetes using simple format annotation",
        one(),
        ADD_DEL,
        pod={NETS: "{ns}/net1,net2@side2"},
        nads={"net1": r("net1"), "net2": rl("net2", plugins=2)},
    ),
    Case(
        "k-network-missing",
        K8S,
        "fails when the network does not exist",
        one(),
        pod={NETS: "net1,missing"},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-json",
        K8S,
        "retrieves delegates from kubernetes using JSON format annotation",
        one(),
        ADD_DEL,
        pod={
            NETS: nets(
                {"name": "net1", "interface": "left0"},
                {"name": "net2", "namespace": "{ns}", "interface": "right0"},
            )
        },
        nads={"net1": r("net1"), "net2": r("net2")},
    ),
    Case(
        "k-json-invalid",
        K8S,
        "fails when the JSON format annotation is invalid",
        one(),
        pod={NETS: '[{"name": "net1"'},
        nads={"net1": r("net1")},
        go_tail="JSON format: ",
    ),
    Case(
        "k-default-gateway",
        K8S,
        "can set the default-gateway on an additional interface",
        one(),
        pod={NETS: nets({"name": "net1", "default-route": ["10.7.9.1"]})},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-on-disk",
        K8S,
        "retrieves delegates from kubernetes using on-disk config files",
        one(),
        ADD_DEL,
        pod={NETS: "net1"},
        nads={"net1": ""},
        files={"confdir/10-net1.conf": json.dumps(r("net1"))},
    ),
    Case(
        "k-minimal-name",
        K8S,
        "injects network name into minimal thick plugin CNI config",
        one(),
        pod={NETS: "net1"},
        nads={"net1": {"cniVersion": "1.0.0", "type": "recorder", "logFile": "{log}"}},
    ),
    Case(
        "k-on-disk-invalid",
        K8S,
        "fails when on-disk config file is not valid",
        one(),
        pod={NETS: "net1"},
        nads={"net1": ""},
        files={"confdir/10-broken.conf": '{"cniVersion": "1.0.0", "name": "net1"'},
        go_tail="10-broken.conf: ",
    ),
    Case(
        "k-cluster-crd",
        K8S,
        "retrieves cluster network from CRD",
        multus(clusterNetwork="cluster", multusNamespace="{ns}"),
        ADD_DEL,
        pod={},
        nads=CLUSTER_NAD,
    ),
    Case(
        "k-default-networks",
        K8S,
        "retrieves default networks from CRD",
        multus(clusterNetwork="cluster", defaultNetworks=["extra"], multusNamespace="{ns}"),
        ADD_DEL,
        pod={NETS: "net1"},
        nads={**CLUSTER_NAD, "extra": r("extra")},
    ),
    Case(
        "k-system-namespace",
        K8S,
        "ignore default networks from CRD in case of kube-system namespace",
        multus(
            clusterNetwork="cluster",
            defaultNetworks=["extra"],
            multusNamespace="{ns}",
            systemNamespaces=["{ns}"],
        ),
        pod={NETS: "net1"},
        nads={**CLUSTER_NAD, "extra": r("extra")},
    ),
    Case(
        "k-cluster-file",
        K8S,
        "retrieves cluster network from file",
        multus(clusterNetwork="{work}/nets/cluster.conflist"),
        ADD_DEL,
        pod={},
        files={"nets/cluster.conflist": json.dumps(rl("cluster", plugins=2))},
    ),
    Case(
        "k-cluster-dir",
        K8S,
        "retrieves cluster network from directory path",
        multus(clusterNetwork="{work}/nets"),
        pod={},
        files={"nets/10-first.conf": json.dumps(r("first")), "nets/20-second.conf": json.dumps(r("second"))},
    ),
    Case(
        "k-cluster-by-name",
        K8S,
        "retrieves cluster network from cni config path",
        multus(clusterNetwork="byname", multusNamespace="{ns}"),
        pod={},
        files={"confdir/30-byname.conf": json.dumps(r("byname"))},
    ),
    Case(
        "k-cluster-missing",
        K8S,
        "Error in case of CRD not found",
        multus(clusterNetwork="nosuch", multusNamespace="{ns}"),
        pod={},
    ),
    Case(
        "k-default-network-annotation",
        K8S,
        "overwrite cluster network when Pod annotation is set",
        multus(clusterNetwork="cluster", multusNamespace="{ns}"),
        ADD_DEL,
        pod={DEFAULT_NET: "alt"},
        nads={**CLUSTER_NAD, "alt": r("alt")},
    ),
    Case(
        "k-bad-confdir",
        K8S,
        "fails with bad confdir",
        multus(clusterNetwork="byname", multusNamespace="{ns}", confDir="{work}/no-such-dir"),
        pod={},
    ),
    Case(
        "k-default-annotation-over-delegates",
        K8S,
        "overwrite multus config when Pod annotation is set",
        one(),
        ADD_DEL,
        pod={DEFAULT_NET: "{ns}/alt", NETS: "net1"},
        nads={"alt": r("alt"), "net1": r("net1")},
    ),
    Case(
        "k-invalid-kubeconfig",
        K8S,
        "fails with no kubeclient and invalid kubeconfig",
        one(kubeconfig="{work}/missing.kubeconfig"),
        pod={},
        go_tail="GetK8sClient: failed to get context for the kubeconfig ",
    ),
    Case(
        "k-no-kubeconfig",
        K8S,
        "fails with no kubeclient and no kubeconfig",
        multus(clusterNetwork="cluster"),
        kube=False,
    ),
    Case(
        "k-cached-delegates",
        K8S,
        "uses cached delegates when an error in loading from pod annotation occurs",
        one(),
        (Step("ADD"), Step(action="annotate", annotations={NETS: "[not json"}), Step("DEL")),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-isolation-violated",
        K8S,
        "Errors when namespace isolation is violated",
        one(namespaceIsolation=True),
        pod={NETS: "{other}/net9"},
        other_nads={"net9": r("net9")},
    ),
    Case(
        "k-isolation-allowed",
        K8S,
        "Properly allows a specified namespace reference when namespace isolation is enabled",
        one(namespaceIsolation=True, globalNamespaces="{other}"),
        ADD_DEL,
        pod={NETS: "{other}/net9"},
        other_nads={"net9": r("net9")},
    ),
    Case("k-bad-format", K8S, "fails when provided with bad format", one(), pod={NETS: "a/b/c"}),
    Case(
        "k-shorthand-long-ifname",
        K8S,
        "fails when provided with bad format (interface name)",
        one(),
        pod={NETS: "net1@averyveryverylongifname"},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-shorthand-uppercase", K8S, "fails when provided with bad format (name)", one(), pod={NETS: "Net1"}
    ),
    Case(
        "k-json-bad-mac",
        K8S,
        "fails when provided with bad format (mac)",
        one(),
        pod={NETS: nets({"name": "net1", "mac": "zz:zz"})},
        nads={"net1": r("net1")},
        go_tail="failed to mac: ",
    ),
    Case(
        "k-json-bad-ip",
        K8S,
        "fails when provided with bad format (ips)",
        one(),
        pod={NETS: nets({"name": "net1", "ips": ["10.1.1.300"]})},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-json-object",
        K8S,
        "fails when the JSON format annotation is invalid (object)",
        one(),
        pod={NETS: '{"name": "net1"}'},
        nads={"net1": r("net1")},
        go_tail="JSON format: ",
    ),
    Case(
        "k-json-empty",
        K8S,
        "retrieves delegates from kubernetes using JSON format annotation (none)",
        one(),
        pod={NETS: "[]"},
    ),
    Case(
        "k-two-default-networks",
        K8S,
        "overwrite cluster network when Pod annotation is set (two)",
        multus(clusterNetwork="cluster", multusNamespace="{ns}"),
        pod={DEFAULT_NET: "alt,cluster"},
        nads={**CLUSTER_NAD, "alt": r("alt")},
    ),
    Case(
        "k-interface-request",
        K8S,
        "retrieves delegates from kubernetes using JSON format annotation (interfaceRequest)",
        one(),
        pod={NETS: nets({"name": "net1", "interfaceRequest": "legacy0"})},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-network-status",
        K8S,
        "Sets pod network annotations without error",
        one(),
        pod={NETS: "net1"},
        nads={
            "net1": r(
                "net1",
                result={
                    "interfaces": [{"name": "net1", "mac": "c2:00:00:00:00:01", "sandbox": "{netns}"}],
                    "ips": [{"address": "10.8.0.4/24", "interface": 0, "gateway": "10.8.0.1"}],
                },
            )
        },
    ),
    Case(
        "k-uid-match",
        K8S,
        "Sets network status without error when pod UIDs match",
        one(),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-no-uid",
        K8S,
        "Sets pod network annotations without error when runtime does not provide a pod UID",
        one(),
        (Step("ADD", args=POD_ARGS_NO_UID),),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
    ),
    Case(
        "k-uid-mismatch",
        K8S,
        "Fails to set pod network annotations when pod UIDs don't match",
        one(),
        (Step("ADD", args=WRONG_UID),),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
    ),
    Case("k-skips-status-no-kube", K8S, "Skips network status given no config", one(), kube=False),
]

TYPES_CASES = [
    Case("t-valid", TYPES, "parses a valid multus configuration", two("1.0.0"), kube=False),
    Case(
        "t-log-file",
        TYPES,
        "checks if logFile and logLevel are set correctly",
        one(logFile="{work}/multus.log", logLevel="debug"),
        kube=False,
    ),
    Case(
        "t-log-options",
        TYPES,
        "checks if logOptions are set correctly",
        one(
            logFile="{work}/multus-rot.log",
            logOptions={"maxAge": 5, "maxSize": 100, "maxBackups": 5, "compress": True},
        ),
        kube=False,
    ),
    Case(
        "t-prev-result",
        TYPES,
        "prevResult with no errors",
        one(
            prevResult={
                "cniVersion": "1.0.0",
                "interfaces": [{"name": "eth0"}],
                "ips": [{"address": "10.1.0.5/24"}],
            }
        ),
        kube=False,
    ),
    Case("t-no-delegates", TYPES, "fails if no kubeconfig or delegates are set", multus(), kube=False),
    Case(
        "t-kubeconfig-no-delegates",
        TYPES,
        "fails if kubeconfig is present but no delegates are set",
        multus(),
        pod={},
    ),
    Case(
        "t-misnamed-fields",
        TYPES,
        "fails when delegate field exists but fields are named incorrectly",
        multus(delegates=[{"cniVersion": "1.0.0", "name": "bad", "plugin": [{"type": "recorder"}]}]),
        kube=False,
    ),
    Case(
        "t-readiness",
        TYPES,
        "honors overrides for network readiness",
        one(readinessindicatorfile="{work}/ready"),
        kube=False,
        files={"ready": "yes"},
    ),
    Case(
        "t-cni-args",
        TYPES,
        "add cni-args in config",
        one(),
        pod={NETS: nets({"name": "net1", "cni-args": {"color": "blue", "size": 3}})},
        nads={"net1": r("net1")},
    ),
    Case(
        "t-cni-args-merge",
        TYPES,
        "add cni-args in config which has cni args already (merge case)",
        one(),
        pod={NETS: nets({"name": "net1", "cni-args": {"color": "blue"}})},
        nads={"net1": r("net1", args={"cni": {"color": "red", "keep": "yes"}})},
    ),
    Case(
        "t-cni-args-conflist",
        TYPES,
        "add cni-args in conflist",
        one(),
        pod={NETS: nets({"name": "net2", "cni-args": {"color": "blue"}})},
        nads={"net2": rl("net2", plugins=2)},
    ),
    Case(
        "t-runtime-config",
        TYPES,
        "creates a valid CNI runtime config",
        multus(
            delegates=[r("podnet", capabilities={"portMappings": True, "bandwidth": True})],
            runtimeConfig={
                "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
                "bandwidth": {
                    "ingressRate": 1000,
                    "ingressBurst": 100,
                    "egressRate": 1000,
                    "egressBurst": 100,
                },
            },
        ),
        kube=False,
    ),
    Case(
        "t-k8s-args-env",
        TYPES,
        "creates a valid CNI runtime config with K8s args passed via CNI_ARGS environment variable",
        one(),
        (Step("ADD", args=POD_ARGS + ";K8S_POD_NETWORK=extra"),),
        kube=False,
    ),
    Case(
        "t-selection-into-delegate",
        TYPES,
        "verify the network selection elements goes into delegateconf",
        one(),
        pod={
            NETS: nets(
                {"name": "net1", "ips": ["10.9.0.5/24"], "mac": "c2:11:22:33:44:55", "interface": "sel0"}
            )
        },
        nads={"net1": r("net1", capabilities={"ips": True, "mac": True})},
    ),
    Case(
        "t-runtime-master",
        TYPES,
        "test mergeCNIRuntimeConfig with masterPlugin",
        one(),
        pod={DEFAULT_NET: nets({"name": "alt", "namespace": "{ns}", "mac": "c2:11:22:33:44:66"})},
        nads={"alt": r("alt", capabilities={"mac": True})},
    ),
    Case(
        "t-runtime-delegate",
        TYPES,
        "test mergeCNIRuntimeConfig with delegate plugin",
        one(),
        pod={
            NETS: nets(
                {
                    "name": "net1",
                    "bandwidth": {"ingressRate": 10, "ingressBurst": 1, "egressRate": 10, "egressBurst": 1},
                }
            )
        },
        nads={"net1": r("net1", capabilities={"bandwidth": True})},
    ),
    Case(
        "t-conf-name",
        TYPES,
        "test DelegateConf Name is delivered",
        one(),
        ADD_DEL,
        pod={NETS: "net1"},
        nads={"net1": r("inner")},
    ),
    Case(
        "t-conflist-name",
        TYPES,
        "test DelegateConfList Name is delivered",
        one(),
        ADD_DEL,
        pod={NETS: "net1"},
        nads={"net1": rl("innerlist", plugins=2)},
    ),
    Case(
        "t-gateway-empty",
        TYPES,
        "test LoadDelegateNetConf keeps empty GatewayRequest",
        one(),
        pod={NETS: nets({"name": "net1", "default-route": []})},
        nads={"net1": r("net1")},
    ),
    Case(
        "t-gateway-dual",
        TYPES,
        "test LoadDelegateNetConf keeps dual GatewayRequest",
        one(),
        pod={NETS: nets({"name": "net1", "default-route": ["10.7.9.1", "fd00::1"]})},
        nads={"net1": r("net1")},
    ),
]

MULTUS_CASES = [
    Case(
        "m020-bad-cache-path",
        M020,
        "fails to save NetConf with bad filepath",
        one(cniDir="/proc/compat-no-such-dir"),
        kube=False,
    ),
    Case(
        "m040-check",
        M040,
        "returns the previous result using CmdCheck",
        two("0.4.0"),
        ADD_CHECK_DEL,
        kube=False,
    ),
    Case(
        "m040-uid-mismatch",
        M040,
        "fails when pod UID is provided and does not match Kube API pod UID",
        one("0.3.1"),
        (Step("ADD", args=WRONG_UID),),
        pod={},
    ),
    Case(
        "m040-uid-match",
        M040,
        "executes delegates when runtime provides a matching pod UID",
        one("0.3.1"),
        ADD_DEL,
        pod={},
    ),
    Case(
        "m040-empty-uid",
        M040,
        "executes delegate with an empty pod UID when runtime does not provide a pod UID",
        one("0.3.1"),
        (Step("ADD", args=POD_ARGS_NO_UID), Step("DEL", args=POD_ARGS_NO_UID)),
        pod={},
    ),
    Case(
        "m040-conflist-del",
        M040,
        "executes confListDel without error",
        multus("0.3.1", delegates=[rl("podlist", "0.3.1", plugins=2)]),
        ADD_DEL,
        kube=False,
    ),
    Case(
        "m040-portmap",
        M040,
        "ensure delegates get portmap runtime config",
        multus(
            "0.3.1",
            delegates=[
                {
                    **rl("podlist", "0.3.1", plugins=1),
                    "plugins": [
                        {"type": "recorder", "logFile": "{log}"},
                        {"type": "recorder", "logFile": "{log}", "capabilities": {"portMappings": True}},
                    ],
                }
            ],
            runtimeConfig={"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]},
        ),
        kube=False,
    ),
    Case("m100-check", M100, "executes delegates with CNI Check", two("1.0.0"), ADD_CHECK_DEL, kube=False),
    Case(
        "m100-gc",
        M100,
        "executes delegates with CNI GC",
        one("1.1.0"),
        (Step("ADD"), Step("GC")),
        kube=False,
        modes=(THIN,),
    ),
    Case(
        "m100-status", M100, "executes delegates with CNI Status", one("1.1.0"), (Step("STATUS"),), kube=False
    ),
    Case(
        "m100-informer",
        M100,
        "executes clusterNetwork delegate with a shared informer",
        multus(clusterNetwork="cluster", multusNamespace="{ns}"),
        ADD_DEL,
        pod={NETS: "net1"},
        nads=CLUSTER_NAD,
        modes=(THICK,),
    ),
]

SERVER_CASES = [
    Case(
        "s-thick-add-check-del",
        THICK_CNI,
        "CNI operations started from the shim: ADD/CHECK/DEL works successfully",
        one("0.4.0"),
        ADD_CHECK_DEL,
        pod={NETS: "net1"},
        nads={"net1": r("net1", "0.4.0")},
        modes=(THICK,),
    ),
    Case(
        "s-thick-override",
        THICK_CNI,
        "CNI operations started from the shim with CNI config override with server config",
        one(cniDir="/proc/compat-overridden"),
        ADD_DEL,
        pod={},
        modes=(THICK,),
    ),
    Case(
        "s-override-keys",
        SERVER,
        "correctly overrides incoming CNI config with server config",
        one(cniDir="/proc/compat-overridden", kubeconfig="/proc/compat-no-kubeconfig"),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        modes=(THICK,),
    ),
    Case(
        "s-override-readiness",
        SERVER,
        "correctly overrides incoming CNI config with server config and ignores readinessindicatorfile",
        one(readinessindicatorfile="{work}/never-written"),
        pod={},
        modes=(THICK,),
        full=True,
    ),
    Case(
        "s-missing-pod-name",
        THICK_CNI,
        "CNI operations started from the shim (no K8S_POD_NAME)",
        one(),
        (Step("ADD", args="IgnoreUnknown=1;K8S_POD_NAMESPACE={ns}"),),
        pod={},
        modes=(THICK,),
    ),
    Case(
        "s-empty-args",
        THICK_CNI,
        "CNI operations started from the shim (empty CNI_ARGS)",
        one(),
        (Step("ADD", args=""),),
        pod={},
        modes=(THICK,),
    ),
]

PRIMARY = {"cniVersion": "0.4.0", "name": "primary-net", "type": "recorder"}


def _caps(*plugins: dict[str, bool]) -> dict[str, object]:
    return {
        "cniVersion": "0.4.0",
        "name": "primary-net",
        "plugins": [{"type": "recorder", "capabilities": c} for c in plugins],
    }


CONFIG_CASES = [
    Case(
        f"g-{name}",
        source,
        test,
        {},
        modes=(THICK,),
        full=True,
        kube=False,
        autoconf={"primary": primary, "keys": keys},
    )
    for name, source, test, primary, keys in [
        ("basic", GENERATOR, "basic multus config", {"10-primary.conf": PRIMARY}, {}),
        (
            "capabilities",
            GENERATOR,
            "multus config with capabilities",
            {"10-primary.conf": {**PRIMARY, "capabilities": {"portMappings": True}}},
            {},
        ),
        (
            "multiple-capabilities-enabled",
            GENERATOR,
            "multus config with multiple capabilities filter only enabled",
            {
                "10-primary.conf": {
                    **PRIMARY,
                    "capabilities": {"portMappings": True, "bandwidth": False, "mac": True},
                }
            },
            {},
        ),
        (
            "plugin-capabilities",
            GENERATOR,
            "multus config with multiple capabilities defined on multiple plugins",
            {"10-primary.conflist": _caps({"portMappings": True}, {"bandwidth": True, "mac": False})},
            {},
        ),
        (
            "override-name",
            MANAGER,
            "Overrides the name of the multus configuration when requested",
            {"10-primary.conf": PRIMARY},
            {"overrideNetworkName": True},
        ),
        (
            "version-mismatch",
            MANAGER,
            "test cni version incompatibility",
            {"10-primary.conf": {**PRIMARY, "cniVersion": "0.3.1"}},
            {},
        ),
    ]
]

DELIBERATE_CASES = [
    Case(
        "d-managed-shadow",
        ISSUE,
        "managed-shadow guard: a NAD that claims to be a driver-made shadow",
        one(),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        nad_annotations={"net1": {keys.BINDING_ANNOTATION: json.dumps({"version": 1, "podUID": "forged"})}},
    ),
]

ISSUE_CASES = [
    Case(
        "i1-reason-word",
        ISSUE,
        "point 1: msg carries Multus's wording, not our reason word",
        one(),
        pod={NETS: "[broken"},
        go_tail="JSON format: ",
    ),
    Case(
        "i2-status-error",
        ISSUE,
        "point 2: a delegate's STATUS error passes through unchanged",
        multus("1.1.0", delegates=[r("podnet", "1.1.0", **failing("STATUS", 50, "status failed"))]),
        (Step("STATUS"),),
        kube=False,
    ),
    Case(
        "i2-add-error",
        ISSUE,
        "point 2: a delegate's ADD error code as Multus returns it",
        multus(delegates=[r("podnet", **failing("ADD", 50, "add failed"))]),
        kube=False,
    ),
    Case(
        "i2-del-error",
        ISSUE,
        "point 2: a delegate's DEL error as Multus returns it",
        multus(delegates=[r("podnet", **failing("DEL", 50, "del failed"))]),
        ADD_DEL,
        kube=False,
    ),
    Case(
        "i2-check-error",
        ISSUE,
        "point 2: a delegate's CHECK error as Multus returns it",
        multus(delegates=[r("podnet", **failing("CHECK", 50, "check failed"))]),
        ADD_CHECK_DEL,
        kube=False,
    ),
    Case(
        "i3-netns-checked",
        ISSUE,
        "point 3: CNI_NETNS checked on ADD before the delegates run",
        one(),
        (Step("ADD", netns="fsdadfad"),),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        go_tail="no net namespace fsdadfad found: ",
    ),
    Case(
        "i4-pod-late",
        ISSUE,
        "point 4: the Pod appears about a second after the ADD starts (thick)",
        one(),
        (Step("ADD", args=POD_ARGS_NO_UID, pod_after=1.0),),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        modes=(THICK,),
        full=True,
    ),
    Case(
        "i5-events",
        M020,
        "executes delegates and kubernetes networks with events check",
        one(),
        pod={NETS: "net1"},
        nads={
            "net1": r(
                "net1",
                result={
                    "interfaces": [{"name": "net1", "sandbox": "{netns}"}],
                    "ips": [{"address": "10.8.1.4/24", "interface": 0}],
                },
            )
        },
        events=True,
        modes=(THICK,),
        full=True,
    ),
    Case(
        "i5-no-network-event",
        ISSUE,
        "point 5: NoNetworkFound Event for a missing NAD",
        one(),
        pod={NETS: "missing"},
        events=True,
        modes=(THICK,),
        full=True,
    ),
]


# The device-plugin resourceName path (issue #33): Multus's device lookup in getKubernetesDelegate,
# from the kubelet's checkpoint (thin only: the daemons would read the machine's kubelet paths).
KUBELET = "pkg/kubeletclient/kubeletclient_test.go"
RES = "example.com/vf"
RN = {keys.RESOURCE_NAME_ANNOTATION: RES}
DEVCAPS = {"deviceID": True, "CNIDeviceInfoFile": True}


def checkpoint(*devices: str, resource: str = RES) -> str:
    entry = {
        "PodUID": "{uid}",
        "ContainerName": "c",
        "ResourceName": resource,
        "DeviceIDs": {"0": list(devices)},
    }
    return json.dumps({"Data": {"PodDeviceEntries": [entry], "RegisteredDevices": {}}, "Checksum": 0})


RESOURCE_NAME_CASES = [
    Case(
        "rn-two-networks",
        K8S,
        "getKubernetesDelegate: resourceName NADs get the Pod's devices in turn (deviceID, pciBusID)",
        one(),
        pod={NETS: "net1,net2"},
        nads={"net1": r("net1", capabilities=DEVCAPS), "net2": rl("net2", plugins=2)},
        nad_annotations={"net1": RN, "net2": RN},
        kubelet_checkpoint=checkpoint("0000:fe:00.1", "0000:fe:00.2"),
        steps=ADD_DEL,
        modes=(THIN,),
    ),
    Case(
        "rn-devices-run-out",
        K8S,
        "getKubernetesDelegate: a NAD finding no device left gets none",
        one(),
        pod={NETS: "net1,net2"},
        nads={"net1": r("net1"), "net2": r("net2")},
        nad_annotations={"net1": RN, "net2": RN},
        kubelet_checkpoint=checkpoint("0000:fe:00.1"),
        modes=(THIN,),
    ),
    Case(
        "rn-other-resource",
        KUBELET,
        "GetPodResourceMap: the Pod holds devices of another resource only",
        one(),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        nad_annotations={"net1": RN},
        kubelet_checkpoint=checkpoint("0000:fe:00.1", resource="example.com/other"),
        modes=(THIN,),
    ),
    Case(
        "rn-no-checkpoint",
        KUBELET,
        "GetResourceClient: no pod-resources socket and no checkpoint fails the ADD",
        one(),
        pod={NETS: "net1"},
        nads={"net1": r("net1")},
        nad_annotations={"net1": RN},
        kubelet_checkpoint="",
        modes=(THIN,),
    ),
]

CASES: list[Case] = [
    *_versions("0.2.0", M020),
    *_versions("0.4.0", M040),
    *_versions("1.0.0", M100),
    *K8S_CASES,
    *TYPES_CASES,
    *MULTUS_CASES,
    *SERVER_CASES,
    *CONFIG_CASES,
    *DELIBERATE_CASES,
    *ISSUE_CASES,
    *RESOURCE_NAME_CASES,
]

BY_ID = {c.id: c for c in CASES}

# Thick-mode cases cheap enough for `make test`; every other thick case runs in `make compat`.
FAST_THICK: frozenset[str] = frozenset({"v100-executes-delegates", "v100-kubernetes-networks"})

# Where cni-shim differs from Multus on purpose: case id -> why (and in which modes).
# docs/compatibility.md lists every entry.
SPEC_CODE = "CNI spec well-known code; the msg text matches Multus"
STATUS_GC = (
    "Multus v4.2.3 reads a single-plugin delegate as a plugin list with no plugins, so its STATUS and GC "
    "reach no delegate and always succeed (fixed upstream after v4.2.3); the CNI spec has STATUS report the "
    "delegate's readiness and GC release the attachments missing from cni.dev/valid-attachments, so "
    "cni-shim runs the delegate's STATUS / GC (and DELs what GC finds stale)"
)
DELIBERATE: dict[str, Deliberate] = {
    **{
        f"v{v}-cleanup-missing-name": Deliberate(
            "a delegate without a name is refused before any delegate runs "
            "(Multus runs the earlier delegates, then fails on 'missing network name' and rolls them back)"
        )
        for v in ("020", "040", "100")
    },
    "k-cluster-file": Deliberate(
        "the delegate cache keeps every plugin's config losslessly, so DEL of a clusterNetwork "
        ".conflist file gets the same config as ADD (Multus v4.2.3 caches the list lossily and its DEL fails: "
        "multus-cni issues #1449/#1454, fixed upstream after v4.2.3)"
    ),
    "d-managed-shadow": Deliberate(
        "the managed-shadow guard refuses a NAD carrying the driver's binding annotation "
        "that does not belong to this Pod, before any delegate runs (Multus has no such guard and runs it)"
    ),
    "i5-events": Deliberate(
        "one ADD writes one AddedInterface Event holding every interface's Multus text joined by "
        "'; ' (issue #21: at most one Event write per ADD); Multus creates one Event per interface"
    ),
    "m100-status": Deliberate(STATUS_GC, modes=(THIN,)),
    "i2-status-error": Deliberate(STATUS_GC, modes=(THIN,)),
    "m100-gc": Deliberate(STATUS_GC, modes=(THIN,)),
    "i4-pod-late": Deliberate(
        "a runtime that sends no K8S_POD_UID gets the Pod's UID looked up leniently, so an ADD whose Pod "
        "appears within the Pod-retry budget runs (Multus v4.2.3 thick refuses the request at once: "
        "'missing pod UID; attempted to recover it from the K8s API, but failed')",
        modes=(THICK,),
    ),
    **{
        case_id: Deliberate(SPEC_CODE, code_only=True)
        for case_id in [
            "k-network-missing",
            "k-json-invalid",
            "k-on-disk-invalid",
            "k-cluster-missing",
            "k-bad-confdir",
            "k-isolation-violated",
            "k-bad-format",
            "k-shorthand-long-ifname",
            "k-shorthand-uppercase",
            "k-json-bad-mac",
            "k-json-bad-ip",
            "k-json-object",
            "k-two-default-networks",
            "k-uid-mismatch",
            "m040-uid-mismatch",
            "t-kubeconfig-no-delegates",
            "i1-reason-word",
            "t-no-delegates",
            "t-misnamed-fields",
            "m020-bad-cache-path",
            "k-no-kubeconfig",
            "s-override-readiness",
            "i5-no-network-event",
            "s-missing-pod-name",
            "s-empty-args",
        ]
    },
    # Multus's daemon ignores the shim config's kubeconfig, and so does ours: thick matches.
    "k-invalid-kubeconfig": Deliberate(SPEC_CODE, modes=(THIN,), code_only=True),
}

# Differences not fixed yet: (case id, mode) -> the strict xfail reason naming its issue point.
KNOWN: dict[tuple[str, str], str] = {}

__all__ = ["CASES", "DELIBERATE", "FAST_THICK", "KNOWN", "POD_ARGS_NO_UID", "THICK", "THIN"]
