"""The SR-IOV DRA kubelet plugin with managed Multus bindings."""
