"""Slot files without a model: names, the budget, which slot a restore takes, and where the
engine writes them (the real save/restore: ``test_warm_states``)."""

import os

from specrag.generators.slot_files import SlotFiles, _least_recent, prompt_key


def _files(tmp_path, budget_mb=1):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"m")
    files = SlotFiles(tmp_path / "states", model, {"n_ctx": 4096}, budget_mb)
    files.prepare()
    return files


def test_a_prompt_has_one_name_and_the_engine_gets_a_folder_with_a_slash(tmp_path):
    a = [{"role": "system", "content": "S"}, {"role": "user", "content": "chunk"}]
    assert prompt_key(a) == prompt_key([dict(m) for m in a]) != prompt_key(a[:1])
    files = _files(tmp_path)
    # llama.cpp joins the file name to the path as a string
    assert files.save_path.endswith(os.sep) and files.folder.is_dir()
    assert files.folder.parent == tmp_path / "states"


def test_the_least_recently_used_files_go_once_over_budget(tmp_path):
    files = _files(tmp_path, budget_mb=1)
    for i, age in enumerate((300, 100, 200)):
        path = files.path(f"k{i}")
        path.write_bytes(b"x" * 400_000)
        os.utime(path, (1e9 - age, 1e9 - age))
    files.prune()  # 1.2 MB in a 1 MB budget: the oldest goes
    assert not files.has("k0") and files.has("k1") and files.has("k2")
    assert files.used_bytes() == 800_000


def test_a_restore_takes_an_idle_slot_used_longest_ago_never_the_latest():
    slots = [{"id": 0, "id_task": 7, "is_processing": False},
             {"id": 1, "id_task": 3, "is_processing": False},
             {"id": 2, "id_task": 1, "is_processing": True}]
    assert _least_recent(slots) == 1
    assert _least_recent(slots + [{"id": 3, "is_processing": False}]) == 3  # never used
    assert _least_recent([{"id": 0, "id_task": 2, "is_processing": True}]) is None
