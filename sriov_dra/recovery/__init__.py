"""Convergence without kubelet: the repair worker and the orphan scan."""
