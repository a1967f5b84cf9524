"""Answering a JSON document from a stdlib BaseHTTPRequestHandler (the unit tests' stand-in API servers)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
    """A sized JSON answer, so an HTTP/1.1 client can keep the connection."""
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
