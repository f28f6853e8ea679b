"""A stand-in model service on 127.0.0.1 for the real agent CLIs.

It speaks enough of two wire protocols, streaming (server-sent events):
- the Anthropic Messages API (`POST /v1/messages`), which `claude` uses;
- the OpenAI Responses API (`POST /v1/responses`), which `codex` uses.

Each test scripts it: the first turn of a conversation answers with one shell tool call
(`command`), every later turn (the request carries a tool result) with a final message.
Requests without tools (titles, summaries, quota probes) get a short text answer. Every
request is logged, and every answer carries usage figures the tests check end to end.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Usage figures per answer: the tests sum them and compare with what drover recorded.
INPUT_TOKENS = 1200
OUTPUT_TOKENS = 34
FINAL_TEXT = "All done: the work is committed."


@dataclass
class Logged:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    answered: str = ""  # "tool", "final", "side" or "other"


@dataclass
class Service:
    """The script (`command`) and the log; `port` is the port the OS chose."""

    command: str = "true"
    port: int = 0
    requests: list[Logged] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # the usage each agent turn reports (tests/e2e/test_budget_e2e.py drives a run past a ceiling)
    input_tokens: int = INPUT_TOKENS
    output_tokens: int = OUTPUT_TOKENS
    # Scripted errors (tests/e2e/test_failures_e2e.py): until `fail_until` (time.time()), every model
    # request is answered `fail_status` (429, 401) with `fail_headers`; `stall` holds each model
    # request open without a byte of answer until `stall` is cleared, then closes it unanswered.
    fail_status: int = 0
    fail_until: float = 0.0
    fail_headers: dict[str, str] = field(default_factory=dict)
    stall: bool = False
    fail_body: dict[str, Any] | None = None  # the error's JSON body, when not the default for its status
    fail_only: str = ""  # "/messages" or "/responses": only that protocol's requests fail or stall
    fail_for: float = 0.0  # seconds: with fail_until unset, requests fail this long from the first one

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def agent_turns(self) -> list[Logged]:
        return [entry for entry in self.requests if entry.answered in ("tool", "final")]

    def usage_total(self) -> tuple[int, int]:
        turns = len(self.agent_turns())
        return turns * self.input_tokens, turns * self.output_tokens


def _sse(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict]]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        handler.wfile.flush()
    handler.close_connection = True


def _json(handler: BaseHTTPRequestHandler, status: int, data: Any) -> None:
    body = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


# Anthropic Messages ---------------------------------------------------------------------

def _has_tool_result(messages: list[dict]) -> bool:
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(block, dict) and block.get("type") == "tool_result"
                                             for block in content):
            return True
    return False


def _bash_tool(tools: list[dict]) -> str:
    names = [tool.get("name", "") for tool in tools]
    return "Bash" if "Bash" in names else ""


def anthropic_events(body: dict, service: Service) -> tuple[str, list[tuple[str, dict]]]:
    model = body.get("model", "claude-stand-in")
    tool = _bash_tool(body.get("tools") or [])
    if tool and not _has_tool_result(body.get("messages", [])):
        kind = "tool"
        block = {"type": "tool_use", "id": "toolu_standin_1", "name": tool, "input": {}}
        delta = {"type": "input_json_delta",
                 "partial_json": json.dumps({"command": service.command, "description": "run the step"})}
        stop = "tool_use"
    else:
        kind = "final" if tool else "side"
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": FINAL_TEXT if tool else "Stand-in"}
        stop = "end_turn"
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_standin", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": service.input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": service.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return kind, events


# OpenAI Responses -----------------------------------------------------------------------

def _shell_tool(tools: list[dict]) -> tuple[str, str]:
    """The shell tool's name and how its arguments look: ("shell", "argv") or (name, "string")."""
    names = [tool.get("name", "") for tool in tools if isinstance(tool, dict)]
    for name in ("shell_command", "exec_command"):
        if name in names:
            return name, "string"
    if "shell" in names:
        return "shell", "argv"
    return "", ""


def responses_events(body: dict, service: Service) -> tuple[str, list[tuple[str, dict]]]:
    items = body.get("input") or []
    answered_tool = any(isinstance(item, dict) and item.get("type") == "function_call_output" for item in items)
    tool, style = _shell_tool(body.get("tools") or [])
    if tool and not answered_tool:
        kind = "tool"
        if style == "argv":
            arguments = {"command": ["bash", "-c", service.command]}
        elif tool == "exec_command":
            # codex returns from a command still running after yield_time_ms (10 s by default)
            # and leaves it in a session; wait longer, as a model would for a slow test suite.
            arguments = {"cmd": service.command, "yield_time_ms": 60000}
        else:
            arguments = {"command": service.command}
        item = {"type": "function_call", "id": "fc_standin_1", "call_id": "call_standin_1", "name": tool,
                "arguments": json.dumps(arguments)}
    else:
        kind = "final" if tool else "side"
        item = {"type": "message", "id": "msg_standin_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": FINAL_TEXT if tool else "Stand-in", "annotations": []}]}
    response = {"id": "resp_standin", "object": "response", "model": body.get("model", "stand-in"),
                "status": "completed", "output": []}
    usage = {"input_tokens": service.input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": service.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": service.input_tokens + service.output_tokens}
    events = [
        ("response.created", {"type": "response.created", "response": {**response, "status": "in_progress"}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed",
                                "response": {**response, "output": [item], "usage": usage}}),
    ]
    return kind, events


def start(service: Service) -> ThreadingHTTPServer:
    """Serve on 127.0.0.1 (a port the OS picks) in a daemon thread; `shutdown()` stops it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def _log(self, body: Any) -> Logged:
            entry = Logged(self.command, self.path, dict(self.headers.items()), body)
            with service.lock:
                service.requests.append(entry)
            return entry

        def do_GET(self) -> None:
            entry = self._log(None)
            entry.answered = "other"
            if self.path.rstrip("/").endswith("/models"):
                _json(self, 200, {"object": "list", "data": [], "models": []})
            else:
                _json(self, 404, {"error": {"type": "not_found", "message": self.path}})

        def do_HEAD(self) -> None:
            self._log(None).answered = "other"
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = raw.decode("utf-8", "replace")
            entry = self._log(body)
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith(("/messages", "/responses")) and _scripted_error(self, service, entry):
                return
            if path.endswith("/messages") and isinstance(body, dict):
                entry.answered, events = anthropic_events(body, service)
                if body.get("stream"):
                    _sse(self, events)
                else:
                    _json(self, 200, _anthropic_whole(events))
            elif path.endswith("/responses") and isinstance(body, dict):
                entry.answered, events = responses_events(body, service)
                _sse(self, events)
            elif path.endswith("/count_tokens"):
                entry.answered = "other"
                _json(self, 200, {"input_tokens": INPUT_TOKENS})
            else:
                entry.answered = "other"
                _json(self, 404, {"error": {"type": "not_found", "message": self.path}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    service.port = server.server_address[1]
    # shutdown() waits for the serving loop's next look at its flag: every 50 ms, not the default
    # half second each test (a skipped one included) would spend stopping it
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def _anthropic_whole(events: list[tuple[str, dict]]) -> dict:
    """The same answer as one JSON message, for a request that did not ask to stream."""
    message = dict(events[0][1]["message"])
    block = dict(events[1][1]["content_block"])
    delta = events[2][1]["delta"]
    if block["type"] == "text":
        block["text"] = delta["text"]
    else:
        block["input"] = json.loads(delta["partial_json"])
    message["content"] = [block]
    message["stop_reason"] = events[4][1]["delta"]["stop_reason"]
    message["usage"] = {**message["usage"], "output_tokens": OUTPUT_TOKENS}
    return message


def _scripted_error(handler: BaseHTTPRequestHandler, service: Service, entry: Logged) -> bool:
    """Answer a model request with the scripted error or stall, if one is set; True when it was."""
    if service.fail_only and not handler.path.split("?")[0].rstrip("/").endswith(service.fail_only):
        return False
    if service.fail_for and not service.fail_until:
        service.fail_until = time.time() + service.fail_for
    if service.stall:
        entry.answered = "stalled"
        while service.stall:
            time.sleep(0.1)
        # the client gave up on it long ago: answering now would only rewrite this record
        # (after the test has read it, or while it does) and write into a closed socket
        handler.close_connection = True
        return True
    if not service.fail_status or time.time() >= service.fail_until:
        return False
    entry.answered = f"error {service.fail_status}"
    kind = {401: "authentication_error", 429: "rate_limit_error"}.get(service.fail_status, "api_error")
    message = {401: "invalid x-api-key", 429: "This request would exceed your rate limit"}.get(
        service.fail_status, "error")
    default = {"type": "error", "error": {"type": kind, "message": message, "code": kind}}
    body = json.dumps(service.fail_body or default).encode()
    handler.send_response(service.fail_status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in service.fail_headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)
    return True
