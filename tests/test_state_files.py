"""Prompt states on disk (``generators.state_files``): found again after a restart, bounded,
encrypted with the store's key, and forgotten when chunks leave the store. The files
alone (no model), the memory store over them, the store's deletions and the factory's
options; the real model's restore across a restart is in ``test_prompt_states``."""

import base64
import os

import numpy as np
import pytest

from specrag.generators.state_files import StateFiles
from specrag.generators.state_folders import invalidate, read_epoch, root_for
from tests.support.env import make_settings


def shared_prefix(a, b) -> int:
    m = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:m]) != np.asarray(b[:m]))
    return int(differ[0]) if len(differ) else m


def toks(*ids) -> np.ndarray:
    return np.array(ids, dtype=np.intc)


def files(tmp_path, budget=1000, cipher=None) -> StateFiles:
    return StateFiles(tmp_path, tmp_path / "model", budget, cipher).load()


def test_states_are_found_again_after_a_restart_and_the_budget_drops_the_least_used(tmp_path):
    a = files(tmp_path)
    a.put(toks(1, 2, 3, 4), b"a" * 300)
    a.put(toks(1, 2, 9, 9), b"b" * 300)
    # a prompt that extends a stored one replaces it
    a.put(toks(1, 2, 3, 4, 5), b"c" * 300)
    assert len(a) == 2 and a.bytes == 600
    # a new process (a restart) indexes the folder and restores the same bytes
    b = files(tmp_path)
    n, name = b.longest(toks(1, 2, 3, 4, 5, 6), shared_prefix)
    assert n == 5 and b.get(name) == (pytest.approx(toks(1, 2, 3, 4, 5)), b"c" * 300)
    assert b.longest(toks(7, 7), shared_prefix) == (0, None)
    # [1 2 3 4 5] was used last: over the budget the [1 2 9 9] state goes first
    b.put(toks(5, 5, 5), b"d" * 500)
    assert b.bytes <= 1000 and b.longest(toks(1, 2, 9, 9), shared_prefix)[0] == 2
    assert b.longest(toks(1, 2, 3, 4, 5), shared_prefix)[0] == 5
    # ... and the order of use survives a restart (file times): the state used is last
    for i, kv in enumerate(sorted((tmp_path / "model").glob("*.kv"))):
        os.utime(kv, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # a fixed order of writes
    first = files(tmp_path)
    oldest = list(first._index)[0]
    assert first.get(oldest) is not None
    assert list(files(tmp_path)._index)[-1] == oldest
    assert len(list((tmp_path / "model").glob("*.kv"))) == 2
    # a state larger than the whole budget is not kept
    assert first.put(toks(8), b"e" * 2000) is None and first.longest(toks(8), shared_prefix)[0] == 0


def test_invalidate_forgets_every_state_and_one_of_an_older_epoch_is_never_restored(tmp_path):
    a = files(tmp_path)
    a.put(toks(1, 2, 3), b"a" * 100)
    late = files(tmp_path)  # a process that has not looked at the epoch since
    before = read_epoch(tmp_path)
    invalidate(tmp_path)
    assert read_epoch(tmp_path) != before
    assert not list(tmp_path.rglob("*.kv"))  # the files are gone at once
    # the late process writes a state under the old epoch (a warming racing the delete)
    late.put(toks(4, 5, 6), b"x" * 100)
    assert list(tmp_path.rglob("*.kv"))
    # nobody restores it: a fresh process deletes it, the late one drops it at its check
    fresh = files(tmp_path)
    assert len(fresh) == 0 and not list(tmp_path.rglob("*.kv"))
    assert late.fresh() is False and len(late) == 0
    assert late.fresh() is True
    # a state put under the new epoch is kept
    late.put(toks(4, 5, 6), b"y" * 100)
    assert files(tmp_path).longest(toks(4, 5, 6), shared_prefix)[0] == 3


def test_with_a_key_no_plaintext_reaches_the_disk_and_another_key_restores_nothing(tmp_path):
    from specrag.security.crypto import Cipher

    key = Cipher(os.urandom(32))
    a = files(tmp_path, cipher=key)
    a.put(toks(101, 102, 103), b"KV-CELLS-OF-THE-DOCUMENT" * 4)
    raw = b"".join(p.read_bytes() for p in (tmp_path / "model").iterdir())
    assert b"KV-CELLS" not in raw and toks(101, 102, 103).tobytes() not in raw
    got = files(tmp_path, cipher=key)
    assert got.get(got.longest(toks(101, 102, 103), shared_prefix)[1])[1].startswith(b"KV-CELLS")
    # another key (or none) reads nothing and drops the files it cannot read
    assert len(files(tmp_path, cipher=Cipher(os.urandom(32)))) == 0
    assert not list((tmp_path / "model").glob("*.kv"))


def test_a_corrupt_or_vanished_state_file_is_a_miss_not_an_error(tmp_path):
    a = files(tmp_path)
    a.put(toks(1, 2, 3), b"a" * 100)
    name = a.longest(toks(1, 2, 3), shared_prefix)[1]
    (tmp_path / "model" / f"{name}.kv").unlink()
    assert a.get(name) is None and len(a) == 0 and a.bytes == 0
    a.put(toks(4, 5), b"b" * 100)
    (tmp_path / "model" / next((tmp_path / "model").glob("*.tok")).name).write_bytes(b"\x01")
    assert len(files(tmp_path)) == 0  # an unreadable index entry: dropped with its state


def test_a_lowered_budget_a_lost_key_and_a_killed_writers_leftovers_are_cleaned_at_load(
        tmp_path):
    from specrag.security.crypto import Cipher

    a = files(tmp_path)
    a.put(toks(1, 2), b"a" * 400)
    a.put(toks(3, 4), b"b" * 400)
    (tmp_path / "model" / ".tmp-abc").write_bytes(b"half")  # killed mid-write
    (tmp_path / "model" / "-lone.tok").write_bytes(toks(9).tobytes())  # its .kv never came
    smaller = StateFiles(tmp_path, tmp_path / "model", 500).load()
    assert len(smaller) == 1 and smaller.bytes == 400
    assert sorted(p.name for p in (tmp_path / "model").iterdir() if not p.name.endswith(
        (".kv", ".tok"))) == [] and not (tmp_path / "model" / "-lone.tok").exists()
    assert len(StateFiles(tmp_path, tmp_path / "model", 0).load()) == 0  # 0: no files at all
    assert not list((tmp_path / "model").iterdir())
    # states written with a key and read without one are not taken for token ids
    files(tmp_path, cipher=Cipher(os.urandom(32))).put(toks(5, 6), b"c" * 100)
    assert len(files(tmp_path)) == 0 and not list((tmp_path / "model").iterdir())


def test_the_folders_of_models_changed_or_unused_for_a_week_are_deleted_and_live_ones_kept(
        tmp_path):
    from specrag.generators.state_folders import model_folder, prune_others

    root = tmp_path / "states"
    models = {n: tmp_path / f"{n}.gguf" for n in ("base", "tuned", "unmounted", "old", "other")}
    for path in models.values():
        path.write_bytes(b"weights")
    folders = {}
    for n, path in models.items():
        folders[n] = model_folder(root, path, {"n_ctx": 4096})
        StateFiles(root, folders[n], 1000, model=(str(path), {"n_ctx": 4096})).load().put(
            toks(1, 2, 3), b"s" * 100)
    # a retune overwrites the distilled draft (a newer file: another folder)
    models["tuned"].write_bytes(b"new weights")
    os.utime(models["tuned"], (1, 1))
    # a model file not visible now (deleted, or on a drive not mounted) waits for the idle rule
    models["unmounted"].unlink()
    # a folder from before records, one of a model unused for a week, and one recent
    unrecorded, recent = root / "0123456789abcdef", root / "fedcba9876543210"
    for folder in (unrecorded, recent):
        folder.mkdir()
        (folder / "x-1.kv").write_bytes(b"s")
    week_ago = os.path.getmtime(recent) - 8 * 86400
    for folder in (unrecorded, folders["old"]):
        for path in [*folder.iterdir(), folder]:
            os.utime(path, (week_ago, week_ago))
    gone = prune_others(root, folders["base"])
    assert sorted(gone) == sorted([folders["tuned"].name, folders["old"].name, unrecorded.name])
    # the model in use, a recent unchanged one (another process may draft with it) stay
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [folders["base"].name, folders["other"].name, folders["unmounted"].name, recent.name])
    kept = StateFiles(root, folders["other"], 1000).load()
    assert len(kept) == 1  # its states, not its record, are what it indexes
    # an invalidation removes the record too; the next load writes it again
    invalidate(root)
    StateFiles(root, folders["base"], 1000, model=(str(models["base"]), {"n_ctx": 4096})).load()
    assert prune_others(root, folders["other"]) == []
    assert (folders["base"] / "model.json").exists()


def test_an_unreadable_epoch_is_not_a_new_one_and_a_vanished_file_is_not_held(tmp_path):
    a = files(tmp_path)
    a.put(toks(1, 2, 3), b"a" * 100)
    name = a.longest(toks(1, 2, 3), shared_prefix)[1]
    (tmp_path / "epoch").mkdir()  # reading it fails (not "no such file"): keep the states
    assert read_epoch(tmp_path) is None and a.fresh() is True and len(a) == 1
    (tmp_path / "epoch").rmdir()
    assert a.holds(name)
    (tmp_path / "model" / f"{name}.kv").unlink()  # evicted by another process
    assert not a.holds(name) and len(a) == 0


def test_only_warmed_prompts_reach_the_disk_and_the_rest_stays_in_memory(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")
    from specrag.generators.prompt_states import PromptStates

    states = PromptStates(budget_bytes=1000, files=files(tmp_path))
    states.add(toks(1, 2, 3), b"q" * 100)  # a question's state: its text stays in memory
    assert len(states) == 1 and not list(tmp_path.rglob("*.kv"))
    states.add(toks(4, 5, 6), b"w" * 100, durable=True)  # a warmed chunk's
    assert len(list(tmp_path.rglob("*.kv"))) == 1


def test_memory_states_fall_back_to_disk_and_forget_everything_on_a_new_epoch(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")
    from specrag.generators.prompt_states import PromptStates

    states = PromptStates(budget_bytes=150, files=files(tmp_path))
    states.add(toks(1, 2, 3, 4), b"a" * 100, durable=True)
    states.add(toks(7, 8, 9), b"b" * 100, durable=True)  # memory keeps one; the disk both
    assert len(states) == 1
    n, key = states.longest(toks(1, 2, 3, 4, 5))
    assert n == 4 and isinstance(key, str) and states.get(key)[1] == b"a" * 100
    assert states.usage() == (200, 1000)  # warming is bounded by the files' budget
    assert states.fresh() is True
    invalidate(tmp_path)
    assert states.fresh() is False and len(states) == 0 and states.bytes == 0
    assert states.longest(toks(7, 8, 9)) == (0, None)


@pytest.mark.slow
def test_chunks_leaving_the_store_invalidate_the_draft_models_states(tmp_path, ingestor):
    from tests.support.docs import write_handbook

    root = root_for(ingestor.settings.data_path)
    good = write_handbook(tmp_path / "docs")
    ingestor.ingest([tmp_path / "docs"])
    seen = {read_epoch(root)}
    ingestor.ingest([tmp_path / "docs"])  # nothing changed: the states stay valid
    assert read_epoch(root) in seen
    good["oncall.md"].write_text("# On-call\n\nPages are acknowledged within 5 minutes.\n")
    assert ingestor.ingest([good["oncall.md"]]).results[0].status == "replaced"
    assert read_epoch(root) not in seen
    seen.add(read_epoch(root))
    assert ingestor.delete("oncall.md") is True
    assert read_epoch(root) not in seen
    seen.add(read_epoch(root))
    ingestor.store.drop_collection("default")
    assert read_epoch(root) not in seen
    seen.add(read_epoch(root))
    # a crash inside a replacement's commit (new version visible, the old one's chunks not
    # yet deleted): recovery deletes chunks that were visible, so states go too
    ingestor.ingest([tmp_path / "docs"])
    seen.add(read_epoch(root))
    store = ingestor.store
    doc = next(d for d in store.documents("default") if d.source == "notes.txt")
    _, docs = store._pair("default")
    meta = store._record(docs, doc.doc_id)
    store._put(docs, doc.doc_id, {**meta, "version": "f" * 64, "stale": meta["version"]})
    store.recover("default")
    assert read_epoch(root) not in seen


def test_the_draft_keeps_states_on_disk_under_the_data_folder_encrypted_with_its_key(
        tmp_path, monkeypatch):
    from specrag.generators.factory import backend_options

    settings = make_settings(tmp_path)
    draft = backend_options("llama-cpp", settings, "draft")
    assert draft["states_dir"] == str(tmp_path / "states") and draft["states_key"] is None
    assert backend_options("llama-cpp", settings, "heavy")["states_dir"] == draft["states_dir"]
    key = os.urandom(32)
    monkeypatch.setenv("SPECRAG_ENCRYPTION_KEY", base64.b64encode(key).decode())
    sealed = make_settings(tmp_path, **{"security.encrypt": True})
    assert backend_options("llama-cpp", sealed, "draft")["states_key"] == key.hex()
    # the disk budget is a llama-cpp option like the others
    small = make_settings(tmp_path, **{"generation.options": {"llama-cpp": {"states_disk_mb": 64}}})
    assert backend_options("llama-cpp", small, "draft")["states_disk_mb"] == 64


def test_a_disk_that_refuses_writes_leaves_states_in_memory(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is in requirements.txt")
    from specrag.generators.prompt_states import PromptStates
    from specrag.generators.worker_child import _state_files

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    # the data folder cannot hold the states folder: the model loads with memory only
    assert _state_files(str(blocked), {"n_ctx": 512}, 64, str(blocked / "states"), 64, None) is None
    disk = files(tmp_path / "d")
    states = PromptStates(budget_bytes=1000, files=disk)
    (tmp_path / "d" / "model").rmdir()
    (tmp_path / "d" / "model").write_text("in the way")  # every write now fails
    assert states.usage() == (0, 1000)  # the files bound warming ...
    states.add(toks(1, 2, 3), b"a" * 100, durable=True)
    assert len(states) == 1 and len(disk) == 0 and states.longest(toks(1, 2, 3))[0] == 3
    # ... until they fail: then memory does, so warming stops instead of churning
    assert states.broken and states.usage() == (100, 1000)
