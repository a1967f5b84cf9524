# The managed-bindings suite's fixtures: the real driver under the shipped RBAC, policies,
# DeviceClasses, and per-test namespace cleanup.
from tests.integration.managed.test_managed_bindings import (  # noqa: F401
    _release_test_namespace,
    classes,
    managed_agent,
    policies,
    second_namespace,
    shipped_rbac_identity,
)
