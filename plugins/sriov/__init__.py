"""An sriov-cni-compatible CNI plugin over the fake SR-IOV node (veth VFs + sysfs tree).

Same NetConf keys, cache layout and error texts as sriov-cni; what a veth cannot do (VLAN, QoS,
trust, spoof check, rates) is validated and recorded in the cache only.

Environment: ``SRIOV_SYSFS_ROOT`` (default /sys) is where deviceID is resolved;
``SRIOV_CNI_DATA_DIR`` (default /var/lib/cni/sriov, overridden by the config key ``dataDir``)
holds the cache, allocation and lock files.
"""
