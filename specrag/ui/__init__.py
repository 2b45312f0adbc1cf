"""Gradio user interface; renders library results only."""
