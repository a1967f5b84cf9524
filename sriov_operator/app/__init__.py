"""Composition root of sriov-operator: configuration, clients, controllers, workers, watches."""
