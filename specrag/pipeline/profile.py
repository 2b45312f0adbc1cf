"""Per-collection settings written by ``specrag tune`` and applied by the engine.

A tuned collection has ``DATA_DIR/tuning/NAME/tuned.json``: ``{"settings": {dotted key:
value}, "tuned_at": ..., "steps": [...]}``. Only the keys in ``TUNABLE`` may appear
(an unknown one is an error, as in a settings file): the acceptance model and its bar,
the router and its bar, the policy, and the draft model (a distilled GGUF). ``settings_for(settings, name)`` is the
settings a question to that collection runs under; ``view(engine, name)`` is the
engine for it: the same loaded models and hooks (``engine.replace``) with the tuned
verifier and router (and its own draft tier when the tune distilled one), cached per
collection until the file changes.

A per-call ``policy`` still wins over a tuned ``generation.policy``; explicit settings
(file or env) do not: the tune's values are the collection's, set later and on purpose.

The files a tune writes (acceptance model, router, distilled draft) are recorded
relative to the collection's tuning folder and resolved on read, so a data dir that is
moved, restored from a backup or mounted elsewhere keeps its tuned collections; a file
outside the folder (a draft the user points at) keeps its absolute path.

Deliberately not here: choosing the values (``tune.fit``, ``tune.distill``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from specrag.resilience.chains import tier_from_settings
from specrag.retrieval.store import check_collection_name
from specrag.settings import Settings
from specrag.types import SpecragError

TUNABLE = ("verify.acceptance", "verify.answer_threshold", "routing.model",
           "routing.threshold", "generation.policy", "models.draft")
FILES = ("verify.acceptance", "routing.model", "models.draft")  # paths to what a tune wrote
_lock = threading.Lock()


def folder(settings: Settings, collection: str) -> Path:
    return settings.data_path / "tuning" / check_collection_name(collection)


def path(settings: Settings, collection: str) -> Path:
    return folder(settings, collection) / "tuned.json"


def read(settings: Settings, collection: str) -> dict:
    """The collection's tuning record ({} when it was never tuned)."""
    p = path(settings, collection)
    if not p.is_file():
        return {}
    try:
        record = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecragError(f"{p} is unreadable ({exc}): run `specrag tune --collection "
                           f"{collection}` again, or delete it") from None
    unknown = sorted(set(record.get("settings", {})) - set(TUNABLE))
    if unknown:
        raise SpecragError(f"{p}: '{unknown[0]}' cannot be tuned per collection "
                           f"(tunable: {', '.join(TUNABLE)})")
    return record


def overrides(settings: Settings, collection: str) -> dict:
    """The collection's tuned values, its files' paths resolved against its folder."""
    values = dict(read(settings, collection).get("settings", {}))
    base = folder(settings, collection)
    for key in FILES:
        value = values.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute() \
                and (base / value).is_file():
            values[key] = str(base / value)
    return values


def _relative(value, base: Path):
    """A path inside ``base`` as a name relative to it; anything else unchanged."""
    try:
        return str(Path(value).resolve().relative_to(base.resolve()))
    except (TypeError, ValueError, OSError):
        return value


def write(settings: Settings, collection: str, values: dict, steps: list[str]) -> Path:
    """Merge ``values`` into the collection's tuned settings (atomically)."""
    bad = sorted(set(values) - set(TUNABLE))
    if bad:
        raise SpecragError(f"'{bad[0]}' cannot be tuned per collection")
    record = read(settings, collection)
    base = folder(settings, collection)
    values = {k: _relative(v, base) if k in FILES else v for k, v in values.items()}
    record["settings"] = {**record.get("settings", {}), **values}
    record["tuned_at"] = time.time()
    record["steps"] = sorted(set(record.get("steps", [])) | set(steps))
    p = path(settings, collection)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    tmp.replace(p)
    return p


def settings_for(settings: Settings, collection: str | None) -> Settings:
    values = overrides(settings, collection or settings.store.collection)
    return settings.with_values(**values) if values else settings


def view(engine, collection: str | None):
    """``engine`` as it answers questions to ``collection`` (itself when untuned)."""
    name = collection or engine.settings.store.collection
    p = path(engine.settings, name)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError:
        return engine
    cache = engine.__dict__.setdefault("_tuned_views", {})
    with _lock:
        hit = cache.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        tuned = settings_for(engine.settings, name)
        changes = {"settings": tuned}
        v = engine.verifier
        if v is not None and tuned.verify.acceptance != engine.settings.verify.acceptance:
            changes["verifier"] = v.with_acceptance(tuned.verify.acceptance,
                                                    tuned.verify.answer_threshold)
        if tuned.models.draft != engine.settings.models.draft:
            # the collection's distilled draft; every other collection keeps the base one
            draft = tier_from_settings("draft", tuned)
            draft.warm_up()
            changes["draft"] = draft
        out = engine.replace(**changes)
        out.tuned_for = name  # a view does not look itself up again
        cache[name] = (stamp, out)
        return out
