"""A small chaos run: every answer right despite injected faults; one record per attempt."""

import json

from specrag.bench import chaos
from tests.support.env import make_settings


def test_small_chaos_run_has_no_failed_answers(tmp_path):
    s = make_settings(tmp_path / "data")
    report = chaos.run(s, n=16, fault_rate=0.3, sessions=0, out_dir=str(tmp_path / "out"), seed=3)
    f = report["faults"]
    assert report["baseline"]["failed_answers"] == 0 and f["failed_answers"] == 0
    assert sum(n for kind, n in f["faults_injected"]["anthropic"].items() if kind != "none") > 0
    r = f["records"]
    assert r["attempts_tried"] == r["ledger_rows"] == r["chat_spans"] > 16
    saved = json.loads((tmp_path / "out" / "chaos.json").read_text())
    assert saved["added_latency"].keys() >= {"p50_ms", "p95_ms"}
    assert "| faults | 0 |" in (tmp_path / "out" / "chaos.md").read_text()
