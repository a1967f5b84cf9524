"""Kubernetes API adapters of sriov-operator (the official client; objects as plain API JSON)."""
