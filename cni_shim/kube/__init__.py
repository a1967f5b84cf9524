"""Kubernetes API adapters: the thin shim's stdlib client and the daemon's official-library client, views and informers."""
