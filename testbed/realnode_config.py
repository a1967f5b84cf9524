"""The configurations of a real node's kubelet and containerd (testbed/realnode.py): one comment
per setting that this host, or the bed, needs. Text only: nothing is started here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def kubelet_config(
    *,
    node_dir: Path,
    runtime_socket: Path,
    ca_file: Path,
    cgroup_root: str,
    port: int,
    healthz_port: int,
    feature_gates: Mapping[str, bool] | None = None,
) -> str:
    """The KubeletConfiguration, one comment per setting that this host (or the bed) needs."""
    gates = json.dumps(dict(sorted((feature_gates or {}).items())))  # JSON is YAML
    return f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These hosts mount cgroup v1 (hybrid); kubelet 1.35+ refuses v1 unless told not to.
failCgroupV1: false
# No systemd runs as PID 1 here, so cgroups are driven through cgroupfs (containerd matches it).
cgroupDriver: cgroupfs
# Its own cgroup subtree: a second node, or another engineer's bed, never shares kubepods.
cgroupRoot: {cgroup_root}
# Some of these machines have swap enabled; the kubelet refuses to start on swap by default.
failSwapOn: false
# This node's own containerd, not a host-wide /run/containerd socket.
containerRuntimeEndpoint: unix://{runtime_socket}
# Every listener on loopback and on a free port: other beds run on the same machine.
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
# No kubelet API client but the tests; the serving cert is self-signed in --cert-dir.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {ca_file}
authorization:
  mode: AlwaysAllow
# Container logs under the node's own directory, not the host's /var/log/pods.
podLogsDir: {node_dir / "pod-logs"}
# Images cannot be pulled back here: never garbage-collect the imported ones.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The shared machine's disk may be fuller than the default 10-15 % thresholds; evicting the test
# Pods for it would be noise.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
# No static Pods and no cluster DNS on the bed.
staticPodPath: ""
clusterDNS: []
# The control plane's gates (testbed.controlplane.FEATURE_GATES), e.g. the kubelet preparing a
# Pod's extended-resource claim.
featureGates: {gates}
"""


def containerd_config(
    *,
    node_dir: Path,
    socket: Path,
    cni_conf_dir: Path,
    cni_bin_dir: Path,
    cdi_dir: Path,
    runc: Path,
    sandbox_image: str,
    netns_under_state_dir: bool = True,
) -> str:
    ctd = node_dir / "ctd"
    return f"""\
# Config version 4 (containerd 2.3): the socket settings live in the grpc plugin sections; the
# pre-v3 top-level [grpc] table is silently ignored.
version = 4
root = '{ctd / "root"}'
state = '{ctd / "state"}'
temp = '{ctd / "tmp"}'
# No /etc/containerd/conf.d: the host's own containerd config (if any) must not leak in.
imports = []
# NRI listens on a host-wide socket (/var/run/nri/nri.sock) a second node would fight over;
# the others cannot work here (no btrfs/zfs/devmapper/erofs) and only log noise.
disabled_plugins = [
  'io.containerd.nri.v1.nri',
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.differ.v1.erofs',
  'io.containerd.mount-handler.v1.erofs',
]

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = '{socket}'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '{socket}.ttrpc'
  [plugins.'io.containerd.internal.v1.opt']
    path = '{ctd / "opt"}'
  [plugins.'io.containerd.shim.v1.manager']
    # Shim sockets under our own state, not the host-wide /run/containerd/s.
    socket_dir = '{ctd / "s"}'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      # Nothing can be pulled: the sandbox image is Kubernetes' pause, built and imported locally.
      sandbox = '{sandbox_image}'
  [plugins.'io.containerd.cri.v1.runtime']
    # root here lacks CAP_SYS_RESOURCE: lowering a sandbox's oom_score_adj below containerd's own
    # fails ("failed to update /proc/self/oom_score_adj: Permission denied") unless clamped.
    restrict_oom_score_adj = true
    # The driver writes its CDI specs to the bed's CDI root; the kubelet passes their device IDs.
    enable_cdi = true
    cdi_spec_dirs = ['{cdi_dir}']
    # Sandbox netns under our state dir: /run/netns is shared with other beds and their leak checks.
    # Not for a node whose CNI runs as the DaemonSet: that mounts the host's /run/netns, as Multus's.
    netns_mounts_under_state_dir = {str(netns_under_state_dir).lower()}
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          # runc v1.4 built with seccomp; Debian's runc 1.1 is too old for containerd 2.x.
          BinaryName = '{runc}'
          Root = '{ctd / "runc"}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{cni_bin_dir}']
      conf_dir = '{cni_conf_dir}'
      # Only the first conf (our shim's 00-*.conf), as with Multus installed as the node CNI.
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    # The streaming server (exec/attach) on loopback and an ephemeral port.
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
"""
