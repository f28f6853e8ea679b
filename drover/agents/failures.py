"""Failure classes: why a run did not end well, read from its exit, the CLI's structured output
and the tail of its log (docs/failures.md).

`classify` answers a `Failure` (the class, the words that decided it, and the reset time when
the output names one) or None for a run that ended well. It reads what the agent printed, and
the agent is untrusted: a forged line can at worst pick another class, whose policy is the
operator's (`[retry]`), and a named reset time is only a wish that drover bounds
(`[retry] wait_max`, drover/loop/retry.py). The words kept are cleaned of control characters
and cut short, so they cannot repaint a terminal or fill the ledger.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from drover.errors import CONTROL_CHARACTER, whole_text
from drover.vocabulary import FAILURE_CLASSES

TAIL_BYTES = 256 * 1024  # of agent.jsonl and agent.log read after a run: the end is what speaks
REASON_CHARS = 240
# The marker launch.py writes in the log of a run it ended for silence (`[agent] stall`).
STALLED_PREFIX = "stalled: no output for"

_AUTH = re.compile(r"\b(?:401|403)\b|invalid[ _-]?(?:x-)?api[ _-]?key|authentication[ _]?(?:error|failed)|"
                   r"unauthori[sz]ed|not logged in|please run /login|invalid bearer token|"
                   r"oauth token (?:has )?expired|credit balance is too low", re.I)
_RATE = re.compile(r"\b429\b|rate[ _-]?limit|usage[ _-]?limit|too many requests|quota exceeded|"
                   r"overloaded|\b529\b", re.I)
# CSI and OSC escapes whole (a title, a hyperlink), then any other control character
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|" + CONTROL_CHARACTER)
_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
# codex: "try again at 9:50 PM." / "try again at Dec 5th, 2026 9:50 PM." (the machine's local time)
_TRY_AT = re.compile(r"try again at (?:([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th)?,? (?:(\d{4}) )?)?"
                     r"(\d{1,2}):(\d{2}) ?([AP]M)", re.I)
# "try again in 5 minutes", "retry after 90 seconds", "resets in 2h"
_TRY_IN = re.compile(r"(?:try again|retry|resets?) (?:in|after) (\d+(?:\.\d+)?) ?"
                     r"(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?)\b", re.I)
# an ISO time after "reset"/"resets at"/"until", and claude's old "usage limit reached|<epoch>"
_ISO = re.compile(r"(?:resets?|until|again)(?: at)?:? (\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?"
                  r"(?:Z|[+-]\d{2}:?\d{2})?)", re.I)
_EPOCH = re.compile(r"limit reached\|(\d{10})\b", re.I)
# git's advice after its error (`hint: run "git cherry-pick --abort".`): what to do next, never what failed
_ADVICE = re.compile(r"\s*hint:")


def with_reason(what: str, reason: str) -> str:
    """`class: reason`, the class once when the reason begins with it (`stalled: no output for 0:08`)."""
    if not reason:
        return what
    return reason if reason.startswith(f"{what}:") else f"{what}: {reason}"


@dataclass(frozen=True)
class Failure:
    """A run that did not end well: its class, the words that decided it, its reset when named."""

    failure: str
    reason: str
    reset_at: datetime | None = None  # aware, UTC

    def __post_init__(self) -> None:
        if self.failure not in FAILURE_CLASSES:
            raise ValueError(f"failure class must be one of {FAILURE_CLASSES}, not {self.failure!r}")

    @property
    def said(self) -> str:
        """Its class and its reason in one line (with_reason)."""
        return with_reason(self.failure, self.reason)

    @property
    def reset_text(self) -> str | None:
        """The reset as the ledger keeps it (ISO 8601, UTC, seconds)."""
        return self.reset_at.astimezone(timezone.utc).isoformat(timespec="seconds") if self.reset_at else None


def clean(text: str, limit: int = REASON_CHARS) -> str:
    """The agent's words made safe to keep and print: no escapes or control characters, one line, short,
    and no lone surrogate (JSON's "\\ud800"), which the ledger cannot write."""
    text = " ".join(whole_text(_CONTROL.sub(" ", text)).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def tail(path: Path, size: int = TAIL_BYTES, *, start: int = 0) -> str:
    """The last `size` bytes of a file as text, none before byte `start` ("" when it is missing)."""
    try:
        from drover.git.files import open_regular

        with open_regular(path, "rb") as handle:  # the agent can put a fifo in its log's place
            handle.seek(0, 2)
            end = handle.tell()
            handle.seek(max(start, end - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class _Signs:
    """What the structured stream said of errors, newest last."""

    words: list[str]
    auth: str = ""
    rate: str = ""
    reset: datetime | None = None


def _stream_signs(jsonl: str) -> _Signs:
    signs = _Signs(words=[])
    for line in jsonl.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line nested ten thousand deep
            continue
        if isinstance(event, dict):
            try:
                _read_event(event, signs)
            except (AttributeError, TypeError, ValueError, ArithmeticError):
                continue  # an event shaped unlike the ones we know says nothing of the failure
    return signs


def _read_event(event: dict[str, Any], signs: _Signs) -> None:
    kind = event.get("type")
    if kind == "rate_limit_event":  # claude with a subscription: rate_limit_info {status, resetsAt}
        info = event.get("rate_limit_info") or {}
        if isinstance(info, dict) and info.get("status") == "rejected":
            signs.rate = f"rate limit rejected ({info.get('rateLimitType') or 'unified'})"
            signs.reset = _from_epoch(info.get("resetsAt")) or signs.reset
        return
    if kind == "result" and event.get("is_error"):  # claude's last word
        status = event.get("api_error_status")
        words = f"{event.get('result') or event.get('subtype') or 'error'}"
        if status in (401, 403):
            signs.auth = f"api error {status}: {words}"
        elif status in (429, 529):
            signs.rate = f"api error {status}: {words}"
        signs.words.append(words)
        return
    if kind == "assistant" and event.get("error"):  # claude: "rate_limit", "authentication_failed"
        error = str(event.get("error"))
        if error == "rate_limit":
            signs.rate = signs.rate or "assistant error rate_limit"
        elif error.startswith("authentication") or error in ("billing_error", "oauth_org_not_allowed"):
            signs.auth = signs.auth or f"assistant error {error}"
        signs.words.append(error)
        return
    if kind == "system" and event.get("subtype") == "api_retry":
        signs.words.append(f"api retry after {event.get('error_status')} {event.get('error') or ''}".strip())
        return
    if kind in ("error", "turn.failed"):  # codex
        holder = event.get("error") if kind == "turn.failed" else event
        message = holder.get("message") if isinstance(holder, dict) else None
        if isinstance(message, str):
            signs.words.append(message)


def _from_epoch(value: object) -> datetime | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        if value > 1e12:  # milliseconds (an integer of 400 digits does not divide into a float)
            value = value / 1000
        return datetime.fromtimestamp(value, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def reset_named(text: str, now: datetime) -> datetime | None:
    """The reset time `text` names, if any (the last one named wins), as an aware UTC time."""
    found: datetime | None = None
    for match in _TRY_AT.finditer(text):
        found = _clock_time(match, now) or found
    for match in _TRY_IN.finditer(text):
        amount, unit = float(match.group(1)), match.group(2).lower()
        scale = 3600 if unit.startswith("h") else 60 if unit.startswith("m") else 1
        try:
            found = now + timedelta(seconds=amount * scale)
        except OverflowError:
            continue
    for match in _ISO.finditer(text):
        try:
            when = datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
            # in UTC here: year 1 at +05:00 (or 9999 at -05:00) is out of range there (hostile review 24)
            found = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except (ValueError, OverflowError):
            continue
    for match in _EPOCH.finditer(text):
        found = _from_epoch(int(match.group(1))) or found
    try:
        return found.astimezone(timezone.utc) if found else None
    except OverflowError:  # a local clock time of year 1, say
        return None


def _clock_time(match: re.Match[str], now: datetime) -> datetime | None:
    """codex's "9:50 PM" (today, or tomorrow once past) or "Dec 5th, 2026 9:50 PM", in local time."""
    month, day, year, hour, minute, half = match.groups()
    local = now.astimezone()
    hour_24 = int(hour) % 12 + (12 if half.upper() == "PM" else 0)
    try:
        if month:
            number = _MONTHS.get(month.lower())
            if number is None:
                return None
            return local.replace(year=int(year) if year else local.year, month=number, day=int(day),
                                 hour=hour_24, minute=int(minute), second=0, microsecond=0)
        when = local.replace(hour=hour_24, minute=int(minute), second=0, microsecond=0)
    except ValueError:
        return None
    return when if when >= local - timedelta(minutes=1) else when + timedelta(days=1)


def classify(*, outcome: str, exit_code: int | None, stalled: str = "", reason: str = "",
             jsonl: str = "", log: str = "", now: datetime | None = None) -> Failure | None:
    """The failure class of a run from how it ended (`outcome` exited/timeout/interrupted, its exit
    code; `stalled` the words when drover ended it for silence; `reason` why it was interrupted),
    its structured stream (`jsonl`) and its log's tail. None when it exited 0."""
    now = now or datetime.now(timezone.utc)
    if outcome == "interrupted":
        return Failure("interrupted", clean(reason or "drover was interrupted"))
    if stalled:
        return Failure("stalled", clean(stalled))
    if outcome == "timeout":
        return Failure("timeout", clean(reason or "ran past [agent] timeout"))
    if outcome == "exited" and exit_code == 0:
        return None
    if outcome != "exited" and reason:
        # an end drover itself explains (a worker's result refused, say): its words stay whole
        return Failure("crashed", clean(reason, 4000))
    signs = _stream_signs(jsonl)
    lines = [line for line in log.splitlines() if line.strip() and not line.startswith("[drover]")]
    # the newest words first: the stream's error messages, then the log's last lines
    said = list(reversed(signs.words)) + list(reversed(lines[-40:]))
    ending = f"exited {exit_code}" if outcome == "exited" else outcome
    if signs.auth:
        return Failure("auth", clean(signs.auth))
    if signs.rate:
        named = signs.reset or next((when for words in said if (when := reset_named(words, now))), None)
        return Failure("rate_limited", clean(signs.rate), named)
    for words in said:
        if _AUTH.search(words):
            return Failure("auth", clean(words))
        if _RATE.search(words):
            return Failure("rate_limited", clean(words), reset_named(words, now))
    # the newest words that say what failed: past git's hints, which follow its error
    last = next((words for words in said if not _ADVICE.match(_CONTROL.sub("", words))), said[0] if said else "")
    return Failure("crashed", clean(f"{ending}: {last}" if last else ending))


def classify_run(run_dir: Path, *, outcome: str, exit_code: int | None, reason: str = "") -> Failure | None:
    """`classify` over a finished run's folder: agent.jsonl (the stream; else the log, where a
    command that prints a CLI's events leaves them) and agent.log's tail."""
    stalled = reason if reason.startswith(STALLED_PREFIX) else ""
    log = tail(run_dir / "agent.log", 16 * 1024)
    jsonl = tail(run_dir / "agent.jsonl") if (run_dir / "agent.jsonl").exists() else log
    return classify(outcome=outcome, exit_code=exit_code, stalled=stalled, reason=reason, jsonl=jsonl, log=log)
