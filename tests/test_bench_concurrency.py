"""``specrag bench concurrency``: the table's figures from known timings, the settings each
runtime is built with, the real service over fake models, and the command line."""

from __future__ import annotations

import pytest

from specrag.bench import concurrency
from specrag.cli.main import build_parser
from specrag.pipeline.service import Service
from tests.support.clocked import FakeClock, ScriptedService
from tests.support.env import make_settings
from tests.support.fakes import engine

FOUR = concurrency.QUESTIONS[:4]
# the opener, then one round of sessions 1, 2, 4 over four questions: 4 + 2 + 1 waves of
# (first token s, final answer s, output tokens per session)
SCRIPT = [(0.5, 1.0, 5),
          (1.0, 2.0, 10), (2.0, 4.0, 20), (3.0, 6.0, 30), (4.0, 8.0, 8),
          (2.0, 5.0, 25), (4.0, 5.0, 25),
          (3.0, 10.0, 20)]


def _scripted_run(tmp_path, runtimes=("llama-server/1", "llama-server"), rounds=1, **kw):
    clock, built, events = FakeClock(100.0), [], []

    def build(s):
        service = ScriptedService(clock, SCRIPT)
        built.append((s, service))
        events.append(f"build {s.generation.draft}/{s.generation.parallel}")
        return service

    result = concurrency.run(make_settings(tmp_path), runtimes=runtimes, sessions=(4, 1, 2),
                             rounds=rounds, questions=FOUR, build=build, clock=clock,
                             close_models=lambda: events.append("close"), **kw)
    return result, built, events


def test_figures_come_from_the_sessions_timings_and_tokens(tmp_path):
    result, built, _ = _scripted_run(tmp_path, runtimes=("llama-server",))
    rows = result["runtimes"]["llama-server"]["rows"]
    assert list(rows) == [1, 2, 4]
    one, two, four = rows[1], rows[2], rows[4]
    # one at a time: firsts 1, 2, 3, 4; finals 2, 4, 6, 8; waves of 5, 5, 5 and 1 tokens/s
    assert (one["first_p50_s"], one["first_p95_s"]) == (2.5, 3.85)
    assert (one["final_p50_s"], one["final_p95_s"]) == (5.0, 7.7)
    assert (one["tokens"], one["wall_s"], one["tokens_per_s"]) == (68, 20.0, 5.0)
    # two at a time: firsts 2, 2, 4, 4; 4 x 25 tokens in 5 + 5 s
    assert (two["first_p50_s"], two["first_p95_s"], two["final_p50_s"]) == (3.0, 4.0, 5.0)
    assert (two["tokens_per_s"], two["first_ratio"], two["throughput_ratio"]) == (10.0, 1.2, 2.0)
    # four at once: 4 x 20 tokens in 10 s
    assert (four["first_p50_s"], four["tokens_per_s"]) == (3.0, 8.0)
    assert (four["first_ratio"], four["throughput_ratio"]) == (1.2, 1.6)
    assert result["runtimes"]["llama-server"]["targets"] == {
        "first_ratio": 1.2, "first_ok": True, "throughput_ratio": 1.6, "throughput_ok": False,
        "met": False}
    table = concurrency.to_markdown(result)
    assert "| llama-server | 4 | 3.00 / 3.00 | 10.00 / 10.00 | 8.00 | 1.20x | 1.60x |" in table
    assert "throughput 1.60x (target >= 1.8x: missed)" in table
    # every session count asked every question, each wave's sessions as different users
    service = built[0][1]
    timed = service.asked[1:]
    assert [q for q, *_ in timed] == list(FOUR) * 3
    assert {p for _, _, p, _ in timed} == {"draft-only"}
    assert [s for _, s, *_ in timed[4:6]] == ["user0", "user1"]


def test_each_runtime_is_built_alone_with_cold_prompts_and_its_models_closed(tmp_path):
    result, built, events = _scripted_run(tmp_path, rounds=2, max_tokens=32)
    # round by round, one runtime's models at a time
    # ``/1``: one slot, one request at a time per model; bare: slots sized to the machine
    assert events == ["build llama-server/1", "close", "build llama-server/0", "close"] * 2
    assert result["runtimes"]["llama-server/1"]["rows"][1]["answers"] == 8
    assert result["runtimes"]["llama-server/1"]["settings"]["parallel"] == 1
    for s, service in built:
        g = s.generation
        assert g.draft == g.heavy and (g.prompt_cache, g.warm_states) == (False, 0)
        assert g.draft_max_tokens == 32 and service.warmed and service.closed
        assert s.concurrency.max_concurrent >= 4 and s.concurrency.max_queue >= 4
    warm = concurrency.runtime_settings(make_settings(tmp_path), "llama-server", warm=True,
                                        max_tokens=None, most=8)
    assert warm.generation.prompt_cache and warm.generation.warm_states == 1024
    assert warm.concurrency.max_concurrent == 8 and warm.generation.draft_max_tokens == 96


def test_a_failed_answer_is_counted_and_left_out_of_the_figures(tmp_path):
    clock = FakeClock()
    # the opener, then 1 at a time: three answers (the second question fails)
    script = [(0.5, 1.0, 5), (1.0, 2.0, 10), (3.0, 4.0, 20), (5.0, 6.0, 30)]
    result = concurrency.run(
        make_settings(tmp_path), runtimes=("llama-server",), sessions=(1,), rounds=1,
        questions=FOUR, build=lambda s: ScriptedService(clock, script, fail={FOUR[1]}),
        clock=clock, close_models=lambda: None)
    row = result["runtimes"]["llama-server"]["rows"][1]
    assert (row["answers"], row["failed"], row["first_p50_s"], row["tokens"]) == (3, 1, 3.0, 60)
    failed = [s for w in result["runtimes"]["llama-server"]["waves"][1] for s in w["sessions"]
              if "error" in s]
    assert [s["question"] for s in failed] == [FOUR[1]]
    assert "GenerationError: the draft model's server process ended" in failed[0]["error"]
    assert "- llama-server: 1 answers failed" in concurrency.to_markdown(result)


def test_the_real_service_over_fake_models_counts_each_sessions_tokens(tmp_path):
    reply = "Employees receive 25 days of paid annual leave [1]."
    result = concurrency.run(
        make_settings(tmp_path), runtimes=("fake",), sessions=(1, 2), rounds=2,
        questions=concurrency.QUESTIONS[:2],
        build=lambda s: Service(s, engine(tmp_path, reply)[0]), close_models=lambda: None)
    r = result["runtimes"]["fake"]
    for n in (1, 2):
        sessions = [s for w in r["waves"][n] for s in w["sessions"]]
        assert len(sessions) == 4 and {s["tier"] for s in sessions} == {"draft"}
        assert {s["tokens"] for s in sessions} == {len(reply.split())}
        assert all(0 <= s["first_s"] <= s["final_s"] for s in sessions)
        assert r["rows"][n]["tokens"] == 4 * len(reply.split())


def test_command_line():
    args = build_parser().parse_args(["bench", "concurrency", "--sessions", "1,2,4,8",
                                      "--runtimes", "llama-server/2,openai", "--rounds", "2"])
    assert args.sessions == (1, 2, 4, 8) and args.runtimes == ("llama-server/2", "openai")
    default = build_parser().parse_args(["bench", "concurrency"])
    assert default.runtimes == ("llama-server/1", "llama-server")
    assert (args.rounds, args.policy, args.warm, args.max_tokens) == (2, "draft-only", False,
                                                                      None)
    assert args.out == "bench-results/concurrency" and args.func.__name__ == "cmd_concurrency"
    args = build_parser().parse_args(["bench", "concurrency", "--warm", "--policy", "lazy",
                                      "--max-tokens", "48"])
    assert (args.warm, args.policy, args.max_tokens) == (True, "lazy", 48)


def test_command_line_refuses_bad_session_counts(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["bench", "concurrency", "--sessions", "1,0"])
    assert exc.value.code == 2
    assert "expected positive numbers like 1,2,4,8, not '1,0'" in capsys.readouterr().err
