"""The service's HTTP endpoint: ``/metrics`` (Prometheus text format) and ``/healthz``.

Binds 127.0.0.1 by default: metrics name the monitored tables, so exposing them beyond the host
is an explicit choice (``--metrics-addr``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("queueops.service")

HealthFn = Callable[[], tuple[bool, dict[str, Any]]]


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, health: HealthFn, port: int, addr: str = "127.0.0.1"):
        registry_, health_ = registry, health

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(registry_), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok, body = health_()
                    self._send(200 if ok else 503, json.dumps(body).encode(), "application/json")
                elif path == "/":
                    self._send(200, b"queueops collector: /metrics /healthz\n", "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                log.debug("http: " + format, *args)

        self.server = ThreadingHTTPServer((addr, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="queueops-metrics", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
