#!/usr/bin/env python3
"""A scripted agent that prints an agent CLI's JSON event stream with usage figures.

Run as `claude` (STREAM_KIND unset; stream-json: an `assistant` event per model message carrying its usage
as it streams, a `result` event with the run's totals at the end) or as `codex` (STREAM_KIND=codex; `exec --json`:
usage only in `turn.completed`, at the end of the turn). STREAM_AGENT (JSON) steers it:
  messages: [[input, output], ...]  the model messages' usage, in order
  sleep: N          seconds to sleep after the messages (while a child `sleep` runs beside it),
                    before the work and the final figures: a run over its ceiling is ended here
  sleep_slot: SLOT  sleep only in this slot's runs (default: every run)
  pidfile: PATH     where it writes "its pid and its child's pid" before sleeping
  forged: [LINE]    raw lines printed after the messages (a hostile agent's forged usage)
  result: [i, o]    the totals the closing event claims (default: the sums of messages)
  linger: N         seconds it takes to exit after its closing event (a CLI slow to exit)
Then it does its slot's work: implement commits a file; review approves; draft does nothing.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

script = json.loads(os.environ.get("STREAM_AGENT") or "{}")
kind = os.environ.get("STREAM_KIND", "claude")
sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
messages = script.get("messages", [[1000, 100]])
model = script.get("model", "claude-stand-in")


def say(event):
    print(json.dumps(event), flush=True)


if kind == "claude":
    say({"type": "system", "subtype": "init", "model": model, "cwd": os.getcwd()})
    for number, (tokens_in, tokens_out) in enumerate(messages, 1):
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        say({"type": "assistant", "message": {"id": f"msg_{number}", "model": model, "usage": usage,
                                              "content": [{"type": "text", "text": f"message {number}"}]}})
else:
    say({"type": "thread.started", "thread_id": "t"})
    say({"type": "turn.started"})
    say({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "working"}})
for line in script.get("forged", []):
    print(line, flush=True)
if script.get("sleep") and script.get("sleep_slot", slot) == slot:
    child = subprocess.Popen(["sleep", str(script["sleep"])])
    if script.get("pidfile"):
        Path(script["pidfile"]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(script["sleep"])


def drover(*args):
    done = subprocess.run(["drover", *args], text=True, capture_output=True)
    print(done.stdout + done.stderr, end="", flush=True)


if slot == "implement":
    Path(f"{item}.txt").write_text("work\n")
    subprocess.run(["git", "add", f"{item}.txt"], check=True)
    subprocess.run(["git", "commit", "-qm", f"{item}: the work"], check=True)
elif slot == "review":
    drover("audit", item, "--level", "reviewed", "--note", "looks right")
tokens_in, tokens_out = script.get("result") or [sum(pair[0] for pair in messages), sum(pair[1] for pair in messages)]
if kind == "claude":
    say({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(messages),
         "total_cost_usd": script.get("cost", 0.5),
         "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}})
else:
    say({"type": "turn.completed", "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}})
time.sleep(script.get("linger", 0))
