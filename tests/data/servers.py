"""Real servers on 127.0.0.1 for remote-data tests: plain HTTP with a settable per-request latency and
bandwidth cap and single-range `Range` requests (206 Partial Content, as static servers and S3 answer them;
switch it off to play a server that ignores Range), and moto's S3-compatible server."""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import time
from pathlib import Path

CHUNK = 64 * 1024


class SlowHandler(http.server.SimpleHTTPRequestHandler):
    latency_s = 0.0
    bandwidth_mib_s: float | None = None
    ranges = True
    fail_every: int | None = None  # every Nth GET is answered 500 (1: every GET; HEAD is answered)
    gets: list[int] = []  # GETs seen so far (one shared counter per server)
    log: list[tuple[str, str, int | None, int | None]] = []  # (method, path, first byte, last byte)

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        time.sleep(self.latency_s)
        if self.command == "GET" and self.fail_every:
            self.gets.append(1)
            if len(self.gets) % self.fail_every == 0:
                self.log.append((self.command, self.path, None, None))
                self.send_error(500, "Internal Server Error")
                return None
        self.remaining: int | None = None
        want = self.headers.get("Range")
        if not (self.ranges and want):
            self.log.append((self.command, self.path, None, None))
            return super().send_head()
        try:
            f = open(self.translate_path(self.path), "rb")  # returned open, as send_head does
        except OSError:
            self.send_error(404, "File not found")
            return None
        size = os.fstat(f.fileno()).st_size
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", want.strip())
        if m is None or not (m[1] or m[2]):
            first, last = size, size  # malformed: unsatisfiable
        elif m[1]:
            first, last = int(m[1]), min(int(m[2]) if m[2] else size - 1, size - 1)
        else:
            first, last = max(size - int(m[2]), 0), size - 1  # "bytes=-N": the last N bytes
        if first > last:
            f.close()
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return None
        self.log.append((self.command, self.path, first, last))
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(self.path))
        self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        f.seek(first)
        self.remaining = last - first + 1
        return f

    def copyfile(self, src, dst) -> None:
        left = self.remaining
        while chunk := src.read(CHUNK if left is None else min(CHUNK, left)):
            if self.bandwidth_mib_s:
                time.sleep(len(chunk) / (self.bandwidth_mib_s * 2**20))
            dst.write(chunk)
            if left is not None:
                left -= len(chunk)


class HttpServer:
    """Serve `root` on 127.0.0.1 in a thread (one thread per request, as a real server would). `log` lists
    every request's method, path and byte range (None, None: the whole file)."""

    def __init__(self, root: Path, latency_s: float = 0.0, bandwidth_mib_s: float | None = None,
                 ranges: bool = True, fail_every: int | None = None):
        self.log: list[tuple[str, str, int | None, int | None]] = []
        handler = type("H", (SlowHandler,), {"latency_s": latency_s, "bandwidth_mib_s": bandwidth_mib_s,
                                             "ranges": ranges, "fail_every": fail_every, "gets": [],
                                             "log": self.log})
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
