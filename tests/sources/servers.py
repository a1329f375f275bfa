"""Real servers on 127.0.0.1 for remote-data tests: plain HTTP with a settable per-request latency and
bandwidth cap, and moto's S3-compatible server."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from pathlib import Path


class SlowHandler(http.server.SimpleHTTPRequestHandler):
    latency_s = 0.0
    bandwidth_mib_s: float | None = None

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        time.sleep(self.latency_s)
        return super().send_head()

    def copyfile(self, src, dst) -> None:
        while chunk := src.read(64 * 1024):
            if self.bandwidth_mib_s:
                time.sleep(len(chunk) / (self.bandwidth_mib_s * 2**20))
            dst.write(chunk)


class HttpServer:
    """Serve `root` on 127.0.0.1 in a thread (one thread per request, as a real server would)."""

    def __init__(self, root: Path, latency_s: float = 0.0, bandwidth_mib_s: float | None = None):
        handler = type("H", (SlowHandler,), {"latency_s": latency_s, "bandwidth_mib_s": bandwidth_mib_s})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     functools.partial(handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HttpServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
