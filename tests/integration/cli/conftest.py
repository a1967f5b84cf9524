# Fixtures of other suites the CLI tests run on: the e2e stack (driver, thick CNI, kubelet), our
# CRDs, and the driver's ServiceAccount under the shipped RBAC.
from tests.e2e.test_gpu_nic_pairs import stacks, thick_stack  # noqa: F401
from tests.integration.driver.test_node_agent import driver_crds  # noqa: F401
from tests.integration.managed.test_managed_bindings import shipped_rbac_identity  # noqa: F401
