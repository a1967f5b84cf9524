"""The local test bed: a real Kubernetes control plane and the simulated SR-IOV node around it.

One module per component (docs/testing.md has the full map):

- control plane: controlplane, bed, bootstrap, pki, kubeconfig, access, audit, probes, runstate, cli
- real node: realnode, realnode_config, host_state, images; simulated kubelet: kubelet_sim,
  fake_kubelet; both behind kubelets
- fake SR-IOV node: fakenode, fakesysfs, sriov_topology
- driver: driver (on a stack), node_agent and managed_driver (for the driver suites), repair_service
- CNI: nodecni (a node's CNI), cni_daemon (a daemon of its own), netlinks, cni_objects, managed_shadows
- GPU stand-in: gpu_plugin; operator: operator, operator_rails, operator_checks
- scenario: stack (the composition), cluster, workloads, scenario, observation, checks, results, soak
- shared: processes, waiting, tools, apiobjects, claims, bound_token, deployment, faults, faultproxy

Kept import-free on purpose: importing one part of the bed (say the fake sysfs tree) must not
pull in the Kubernetes client. Import from the submodules, e.g. ``testbed.controlplane``.
"""
