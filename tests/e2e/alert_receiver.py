"""A webhook receiver for the alert tests: a python http.server on a free loopback port that
records every POST (path, headers, JSON body). Importable without pytest."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    """Answers every POST 200 (or `fail_next` times 503 first); `received` holds
    (monotonic time, path, headers dict, parsed JSON body or the raw text)."""

    def __init__(self) -> None:
        self.received: list[tuple[float, str, dict, object]] = []
        self.fail_next = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n).decode("utf-8", "replace")
                try:
                    body: object = json.loads(raw)
                except ValueError:
                    body = raw
                with receiver._lock:
                    fail = receiver.fail_next > 0
                    if fail:
                        receiver.fail_next -= 1
                    receiver.received.append((time.monotonic(), self.path, dict(self.headers), body))
                self.send_response(503 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self, path: str | None = None) -> list[object]:
        with self._lock:
            return [b for _, p, _, b in self.received if path is None or p == path]

    def firing_ids(self, path: str | None = None) -> Counter:
        """How many deliveries each firing id got (from the X-Sediment-Firing-Id header)."""
        with self._lock:
            return Counter(h.get("X-Sediment-Firing-Id") for _, p, h, _ in self.received
                           if path is None or p == path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
