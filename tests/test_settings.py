
import pytest
import yaml

from specrag.cli.main import main
from specrag.settings import Settings, flat


def test_defaults_are_the_design_values():
    s = Settings()
    assert s.retrieval.top_k == 50 and s.retrieval.draft_k == 1
    assert 0 < s.verify.threshold < 1 and s.retrieval.verify_k == 10
    assert s.profile == "offline"


def test_yaml_round_trip_keeps_every_value():
    s = Settings().with_values(**{"retrieval.top_k": 7, "models.embedder": "path:/m",
                                  "verify.threshold": 0.61})
    again = Settings.from_yaml(s.to_yaml())
    assert again == s
    assert Settings.from_dict(s.to_dict()) == s


def test_layers_default_file_env_and_origins(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump({"retrieval": {"top_k": 20, "draft_k": 4},
                                   "chunking": {"chunk_size": 128}}))
    s, origins = Settings.load(cfg, env={"SPECRAG_RETRIEVAL__TOP_K": "30",
                                         "SPECRAG_DATA_DIR": str(tmp_path)})
    assert s.retrieval.top_k == 30 and origins["retrieval.top_k"] == "env:SPECRAG_RETRIEVAL__TOP_K"
    assert s.retrieval.draft_k == 4 and origins["retrieval.draft_k"] == f"file:{cfg}"
    assert s.chunking.chunk_size == 128
    assert origins["verify.threshold"] == "default"
    assert s.data_path == tmp_path


def test_data_dir_settings_file_is_picked_up(tmp_path):
    (tmp_path / "specrag.yaml").write_text("verify:\n  threshold: 0.5\n")
    s, origins = Settings.load(env={"SPECRAG_DATA_DIR": str(tmp_path)})
    assert s.verify.threshold == 0.5
    assert origins["verify.threshold"].startswith("file:")


@pytest.mark.parametrize("bad", [{"retrieval": {"top_kk": 3}}, {"nope": 1}])
def test_unknown_keys_are_rejected(tmp_path, bad):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match="unknown setting"):
        Settings.load(cfg, env={})


def test_wrong_type_and_profile_are_clear():
    with pytest.raises(ValueError, match="retrieval.top_k.*int"):
        Settings.load(env={"SPECRAG_RETRIEVAL__TOP_K": "many"})
    with pytest.raises(ValueError, match="SPECRAG_PROFILE"):
        Settings.load(env={"SPECRAG_PROFILE": "cloud"})


def test_config_show_prints_values_and_origins(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECRAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SPECRAG_RETRIEVAL__TOP_K", "12")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("retrieval.top_k"))
    assert "12" in line and "env:SPECRAG_RETRIEVAL__TOP_K" in line
    assert main(["config", "show", "--yaml"]) == 0
    assert Settings.from_yaml(capsys.readouterr().out).retrieval.top_k == 12


def test_secrets_are_named_not_stored():
    assert "ANTHROPIC_API_KEY" in flat(Settings()).values()
    assert not any("sk-" in str(v) for v in flat(Settings()).values())


def test_a_setting_of_an_earlier_release_is_ignored_with_a_warning(tmp_path, caplog):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(yaml.safe_dump({"generation": {"local_isolation": "thread",
                                                  "extra_bufts": True, "threads": 3}}))
    s, origins = Settings.load(cfg, env={})
    assert s.generation.threads == 3 and "generation.local_isolation" not in origins
    assert "'generation.local_isolation' is ignored" in caplog.text
    assert "'generation.extra_bufts' is ignored" in caplog.text
