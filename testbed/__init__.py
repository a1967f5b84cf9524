"""The local test bed: a real Kubernetes control plane and the simulated SR-IOV node around it.

Kept import-free on purpose: importing one part of the bed (say the fake sysfs tree) must not
pull in the Kubernetes client. Import from the submodules, e.g. ``testbed.controlplane``.
"""
