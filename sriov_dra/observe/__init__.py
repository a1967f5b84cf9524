"""What operators see: Kubernetes Events, structured log lines and Prometheus metrics."""
