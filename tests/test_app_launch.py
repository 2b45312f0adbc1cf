"""``python app.py`` needs no environment variable: its theme survives Gradio's own
theme comparisons, and it never sends usage analytics, whatever the environment says."""

import pytest

from tests.support.env import make_settings


def test_theme_compares_with_every_built_in_theme():
    import gradio as gr
    from gradio import utils

    theme = __import__("specrag.ui.app", fromlist=["launch_options"]).launch_options()["theme"]
    # what Blocks.launch does to tell a custom theme (it raised on string fonts)
    assert not any(theme.to_dict() == t.to_dict() for t in utils.BUILT_IN_THEMES.values())
    fonts = theme._font + theme._font_mono
    assert fonts and all(isinstance(f, gr.themes.Font) for f in fonts)
    # system fonts only: nothing for an offline browser to fetch
    assert all(f.stylesheet() == {"url": None, "css": None} for f in fonts)


@pytest.mark.slow
def test_analytics_are_off_even_when_the_environment_asks_for_them(tmp_path, monkeypatch):
    from specrag.ui.app import build

    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "True")
    demo = build(make_settings(tmp_path / "data"), sample=False)
    assert demo.analytics_enabled is False
    assert demo.get_config_file()["analytics_enabled"] is False
