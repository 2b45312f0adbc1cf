"""``specrag models pull``: fetch the active settings' model files ahead of the first
start, a progress bar per file, and say where each landed; ``--check`` only verifies
what is already here (exit 1 when something is missing or does not match its pin).

An interrupted pull resumes where it stopped (``model_fetch``): run it again.
Deliberately not here: which roles need a file, fetching and checking (``model_files``,
``sources``, ``model_fetch``); this module parses arguments and prints.
"""

from __future__ import annotations

import json
import sys

from tqdm import tqdm

from specrag import model_files, sources


def add_parsers(sub) -> None:
    models = sub.add_parser("models", help="the model files: fetch them ahead, or check them")
    msub = models.add_subparsers(dest="models_command", required=True)
    pull = msub.add_parser("pull", help="fetch every model the settings use (resumable), "
                                        "print where each is and its size")
    pull.add_argument("--role", action="append", choices=model_files.ROLES, default=[],
                      help="only this role (repeatable; default: every role the settings use "
                           "on this machine)")
    pull.add_argument("--check", action="store_true",
                      help="fetch nothing: verify what is cached (sha256), exit 1 if any is "
                           "missing or wrong")
    pull.add_argument("--json", action="store_true")
    pull.set_defaults(func=cmd_pull)


class Bars:
    """``progress(label, done, total)`` as one tqdm bar per file, on stderr."""

    def __init__(self):
        self.bars: dict[str, tqdm] = {}

    def __call__(self, label: str, done: int, total: int | None) -> None:
        bar = self.bars.get(label)
        if bar is None:
            bar = self.bars[label] = tqdm(total=total, initial=done, desc=label, unit="B",
                                          unit_scale=True, unit_divisor=1024, file=sys.stderr)
        else:
            bar.update(done - bar.n)
        if total is not None and done >= total:
            self.bars.pop(label).close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def cmd_pull(args, settings) -> int:
    wanted = args.role or model_files.roles(settings)
    bars = Bars() if not args.json else None
    rows = []
    try:
        for role in wanted:
            path, why = (model_files.check(role, settings) if args.check
                         else model_files.pull(role, settings, bars))
            resolved = model_files.role_settings(role, settings) or settings
            rows.append({"role": role, "source": sources.source_for(role, resolved),
                         "path": str(path) if path else None,
                         "bytes": model_files.size(path) if path else None, "error": why or None})
            if not args.json:
                print(f"{role:<14} {rows[-1]['bytes'] / 1e6:9.1f} MB  {path}" if path
                      else f"{role:<14} {'missing':>12}  {why}", flush=True)
    finally:
        if bars is not None:
            bars.close()
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if all(r["path"] for r in rows) else 1

