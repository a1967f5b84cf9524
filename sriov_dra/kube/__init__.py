"""Kubernetes API adapters: the only package that imports the official client."""
