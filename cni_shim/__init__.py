"""A Multus-compatible delegating CNI plugin (thin executable and thick daemon)."""
