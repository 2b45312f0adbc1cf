"""CI's front-door check: start ``python app.py`` as a user does and ask it one question.

The app runs with a bare environment (PATH, HOME, a port): none of the variables the
tests set (GRADIO_ANALYTICS_ENABLED, HF_HUB_OFFLINE, ...), the default data and model
cache folders, the default models. It must serve within ``START_S``, and the sample
question must come back with a non-empty answer through ``gradio_client``, and so must a
second question asked once the app has had time to warm the sample's draft prompts.
Prints the times a new user waits; exits non-zero (with the app's log tail) otherwise.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_S = 900  # the first start may fetch the pinned model wheels (~1.7 GB)
QUESTION = "How many days of paid annual leave do employees get?"
SECOND = "What is the hotel limit per night?"  # another section of the sample handbook
WARM_S = 30  # the sample's 32 chunks take ~15 s to warm on 2 cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
           "GRADIO_SERVER_PORT": str(port), "LANG": "C.UTF-8"}
    log_path = ROOT / ".ci" / "front-door.log"
    log = open(log_path, "wb")
    t0 = time.time()
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log,
                           stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        while True:
            if app.poll() is not None:
                return fail(f"the app exited with status {app.returncode} before serving", log_path)
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if time.time() - t0 > START_S:
                    return fail(f"the app did not serve within {START_S} s", log_path)
                time.sleep(0.5)
        served = time.time() - t0
        from gradio_client import Client

        answer = Client(url, verbose=False).predict(QUESTION, "handbook", "", api_name="/chat")
        asked = time.time() - t0 - served
        if not (answer and str(answer.get("answer", "")).strip()):
            return fail(f"no answer to the sample question: {answer!r}", log_path)
        if app.poll() is not None:
            return fail("the app died while answering", log_path)
        t = answer.get("timings_ms", {})
        print(f"front door: serving after {served:.1f} s; first answer {asked:.1f} s later "
              f"(tier {answer['tier']}, engine total {t.get('total', 0) / 1000:.2f} s), "
              f"{tree_rss_mb(app.pid):.0f} MB resident (app + model and parser workers): "
              f"{answer['answer'][:120]!r}")
        # meanwhile the app warms the sample's draft prompts (``generation.warm_states``):
        # a first question about another chunk then starts from a stored state
        time.sleep(WARM_S)
        second = Client(url, verbose=False).predict(SECOND, "handbook", "", api_name="/chat")
        if not (second and str(second.get("answer", "")).strip()) or app.poll() is not None:
            return fail(f"no answer to the second question: {second!r}", log_path)
        t2 = second.get("timings_ms", {})
        print(f"front door: a second question {WARM_S} s later: draft first token "
              f"{t2.get('draft_ttft', 0) / 1000:.2f} s (the first: "
              f"{t.get('draft_ttft', 0) / 1000:.2f} s), engine total "
              f"{t2.get('total', 0) / 1000:.2f} s, tier {second['tier']}, "
              f"{tree_rss_mb(app.pid):.0f} MB resident: {second['answer'][:120]!r}")
        return 0
    except Exception as err:  # noqa: BLE001 - any failure fails the check, with the log
        return fail(f"{type(err).__name__}: {err}", log_path)
    finally:
        app.terminate()
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
        log.close()


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants (Linux /proc), in MB: what a
    Space's memory limit counts."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def fail(message: str, log_path: Path) -> int:
    print(f"front door FAILED: {message}", file=sys.stderr)
    print(log_path.read_text(errors="replace")[-4000:], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
