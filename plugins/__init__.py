"""CNI plugins used by tests: an sriov-cni-compatible plugin over veth "VFs", a recorder and a fault injector."""
