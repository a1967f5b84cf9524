"""The kubelet-facing side of the node agent: DRA node service and plugin registration over gRPC.

Message stubs are generated at build time from ``protos/`` into ``gen/`` (``make gen``).
"""
