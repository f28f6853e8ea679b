"""drover report (text, JSON, HTML), drive --report and [notify] command, on the demo's ledger and
on a generated 200-item one."""
from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import sys
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers import (APPROVING, REPORT_HOSTILE, TESTS, configure, drover, git, made_once, new_item, one_line,
                     seed_report_ledger)

RECORDER = TESTS / "agents" / "notify_recorder.py"


class Page(HTMLParser):
    """What a browser would build of the page: its elements with their attributes, and its text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {name: value or "" for name, value in attrs}))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag: str, css: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.elements if name == tag and css in attrs.get("class", "").split()]


def assert_self_contained(text: str) -> Page:
    """No script, no element that fetches, no URL of any kind, no event handler: a page that cannot reach out."""
    page = Page(text)
    tags = {tag for tag, _ in page.elements}
    assert not tags & {"script", "img", "link", "iframe", "object", "embed", "a", "image", "use", "foreignobject",
                       "audio", "video", "source", "form", "base"}, tags
    for tag, attrs in page.elements:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert "//" not in value and "url(" not in value.lower(), (tag, name, value)
    assert not re.search(r"https?:|//|url\(|@import", text.replace(REPORT_HOSTILE[0], "")), "a URL in the page"
    return page


@pytest.fixture(scope="module")
def demo_root(demo_run, tmp_path_factory) -> Path:
    """The demo's project after `make demo`'s drive: three items merged (a copy for the module)."""
    folder, done = demo_run
    assert done.returncode == 0, done.stdout + done.stderr
    root = tmp_path_factory.mktemp("demo") / "project"
    shutil.copytree(folder, root, symlinks=True)
    return root


def ledger_count(root: Path, sql: str) -> int:
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def documented_fields() -> dict[str, dict[str, str]]:
    from drover.ledger.report import MEANINGS

    return MEANINGS


def assert_schema(value: dict) -> None:
    """Every object of the JSON has exactly the fields docs/report.md documents, of their types."""
    fields = documented_fields()
    assert set(value) == set(fields["Report"]) and value["schema"] == 1
    for name in ("merged", "over_budget", "parked", "failed", "rated_models"):
        assert all(isinstance(one, str) for one in value[name])
    for kind, rows in (("ItemLine", value["items"]), ("RunLine", value["runs"]), ("GroupLine", value["agents"]),
                       ("GroupLine", value["models"]), ("Totals", [value["totals"]])):
        for row in rows:
            assert set(row) == set(fields[kind]), kind
            for count in ("rounds", "runs", "items", "input_tokens", "output_tokens", "checks_passed"):
                if count in row and kind != "RunLine":
                    assert isinstance(row[count], int) and row[count] >= 0, (kind, count)
            if "cost_usd" in row:
                assert row["cost_usd"] is None or isinstance(row["cost_usd"], float)
                assert row["cost_source"] in ("", "rates", "cli", "mixed")


# --- the demo's ledger ---------------------------------------------------------------------------


def test_the_report_of_the_demo_says_three_items_merged_with_their_rounds_and_checks(demo_root):
    done = drover(demo_root, "report", check=True)
    assert "items 3: merged 3, over budget 0, parked 0, failed 0" in done.stdout
    assert re.search(r"^Merged \(3\)$", done.stdout, re.M)
    runs = ledger_count(demo_root, "SELECT count(*) FROM runs")
    assert f"runs {runs} (failed 0" in done.stdout
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[done.stdout.splitlines().index("Items") + 2:]
            if line.startswith("  D-")}
    assert set(rows) == {"D-1", "D-2", "D-3"}
    assert all(row[1] == "merged" and row[2] == "1" and row[3] == "2/2" for row in rows.values())
    assert "demo-implementer" in done.stdout and "demo-reviewer" in done.stdout
    # the demo's scripted agents report no tokens: that reads as none reported, not as a count of 0
    assert "tokens: none reported; cost -" in done.stdout
    assert all(row[5] == "-" for row in rows.values())


def test_the_demo_report_as_json_follows_the_documented_schema(demo_root):
    value = json.loads(drover(demo_root, "report", "--json", check=True).stdout)
    assert_schema(value)
    assert value["merged"] == ["D-1", "D-2", "D-3"] and value["since"] is None
    assert len(value["runs"]) == ledger_count(demo_root, "SELECT count(*) FROM runs")
    by_id = {item["id"]: item for item in value["items"]}
    assert by_id["D-2"]["deps"] == ["D-1"]
    # the demo's reviewer asks for changes once, then approves: not at first review, one round to approval
    assert all(item["approved_at_first_review"] is False and item["rounds_to_approval"] == 1 for item in by_id.values())
    implementer = next(group for group in value["agents"] if group["name"] == "demo-implementer")
    assert implementer["implemented"] == 3 and implementer["first_review_share"] == 0.0
    assert implementer["mean_rounds_to_approval"] == 1.0


def test_the_demo_report_page_has_every_item_dep_and_run_and_nothing_from_outside(demo_root, tmp_path):
    out = tmp_path / "page.html"
    done = drover(demo_root, "report", "--html", str(out), check=True)
    assert str(out) in done.stdout
    page = assert_self_contained(out.read_text(encoding="utf-8"))
    assert sorted(node["data-id"] for node in page.having("g", "node")) == ["D-1", "D-2", "D-3"]
    assert [(edge["data-from"], edge["data-to"]) for edge in page.having("path", "edge")] == [("D-1", "D-2")]
    bars = page.having("rect", "bar")
    conn = sqlite3.connect(demo_root / ".drover" / "ledger.db")
    assert sorted(bar["data-run"] for bar in bars) == sorted(row[0] for row in conn.execute("SELECT id FROM runs"))
    conn.close()
    assert {bar["data-outcome"] for bar in bars} == {"ok"}


# --- 200 items -------------------------------------------------------------------------------------


@pytest.fixture
def big(repo) -> dict:
    """The 200-item project and what its report must find (made once per test process, then
    copied: helpers.made_once)."""
    return made_once(repo, ("test_report", "big"), lambda: seed_report_ledger(repo))


def test_the_report_of_200_items_counts_each_outcome_and_failure_class(repo, big):
    value = json.loads(drover(repo, "report", "--json", check=True).stdout)
    assert_schema(value)
    assert len(value["items"]) == 200 and [item["id"] for item in value["items"]] == big["ids"]
    for name in ("merged", "over_budget", "parked", "failed"):
        assert value[name] == big[name], name
    totals = value["totals"]
    assert totals["runs"] == big["runs"] == len(value["runs"])
    assert (totals["input_tokens"], totals["output_tokens"]) == (big["input"], big["output"])
    assert totals["failures"] == dict(sorted(big["failures"].items()))
    assert totals["cost_source"] == "cli" and value["rated_models"] == []
    agents = {group["name"]: group for group in value["agents"]}
    assert set(agents) == {"alpha", "beta", "reviewer"}
    for name in ("alpha", "beta"):
        assert agents[name]["failures"] == dict(sorted(big["agent_failures"][name].items()))
        mine = [item for item, first in big["first"].items() if int(item[2:]) % 2 == (name == "alpha")]
        firsts = sum(big["first"][item] for item in mine)
        assert agents[name]["approved_at_first_review"] == firsts
        assert agents[name]["first_review_share"] == pytest.approx(firsts / len(mine))
        # one round before approval for each item not approved at once
        assert agents[name]["mean_rounds_to_approval"] == pytest.approx((len(mine) - firsts) / len(mine))
    items = {item["id"]: item for item in value["items"]}
    assert items["D-6"]["reason"].startswith("implement run r6-implement-3600: ")  # a failure's class and words
    assert items["D-7"]["reason"] == "implement run r7-implement-4200: unclassified: exit 2 <b>bold</b>"
    assert items["D-14"]["reason"].startswith("over budget: ") and items["D-14"]["status"] == "over_budget"
    assert items["D-9"]["runs"] == 0 and items["D-9"]["status"] == "open"  # untouched, still in the report
    assert items["D-13"]["checks_passed"] == 1 and items["D-13"]["checks_failed"] == 1
    models = {group["name"] for group in value["models"]}
    assert models == {"m-large", "m-small", "(unknown)"}
    text = drover(repo, "report", check=True).stdout
    assert f"tokens {big['input']:,} in, {big['output']:,} out; " in text
    (untouched,) = [line.split() for line in text.splitlines() if line.startswith("  D-9 ")]
    assert untouched[5] == "-"  # no runs: no tokens reported, not 0


def test_report_html_says_where_it_wrote_as_a_success_not_an_error(repo, tmp_path):
    configure(repo)
    out = tmp_path / "page.html"
    done = drover(repo, "report", "--html", str(out), check=True)
    assert done.stdout == f"report written to {out}\n" and "drover:" not in done.stderr
    assert_self_contained(out.read_text(encoding="utf-8"))


def test_a_bidi_control_in_a_title_cannot_reorder_drovers_words_in_a_tooltip(repo, tmp_path):
    """Hostile review 39: the page's tooltips (an item's node in the graph: `D-1: <title> (<status>)`;
    a run's bar: its agent, model and reason) are one paragraph each, and a U+202E in the title
    (`)devorppa(`) reversed the rest, drover's `(open)` included: it read `(approved)`. Each bidi
    control is shown as ? there, as on the terminal; the table's cell keeps the title as written."""
    configure(repo)
    item = new_item(repo, "Title \u202e)devorppa(")
    out = tmp_path / "page.html"
    drover(repo, "report", "--html", str(out), check=True)
    page = out.read_text(encoding="utf-8")
    tips = re.findall(r"<title>([^<]*)</title>", page)
    assert f"{item}: Title ?)devorppa( (open)" in tips
    assert not any("\u202e" in tip for tip in tips) and "<td>Title \u202e)devorppa(</td>" in page


def test_a_page_written_into_the_checkout_says_the_next_finish_refuses_it(repo):
    """README's `drover report --since 12h --html night.html`, run in the project as a new user (on
    markupsafe) did, left the page untracked in the checkout, and the next `drive --finish` refused
    to start (`the checkout ... has untracked files`). The report says so as it writes the page there,
    and says nothing once git ignores it."""
    configure(repo)
    item = new_item(repo, "Add a thing")
    done = drover(repo, "report", "--html", "night.html", check=True)
    assert done.stdout == "report written to night.html\n"
    assert done.stderr == ("drover: warning: night.html is untracked in this checkout: `drover finish` and "
                           "`drive --finish` refuse to merge while it is there; add it to .gitignore, or write the "
                           "page outside the checkout\n"), done.stderr
    refused = drover(repo, "drive", item, "--finish")
    assert refused.returncode != 0 and "night.html (untracked)" in refused.stdout + refused.stderr
    with (repo / ".gitignore").open("a") as ignore:
        ignore.write("night.html\n")
    again = drover(repo, "report", "--html", "night.html", check=True)
    assert again.stderr == "" and (repo / "night.html").is_file()


def test_the_200_item_page_draws_every_item_edge_and_run_and_keeps_hostile_text_as_text(repo, big, tmp_path):
    out = tmp_path / "report.html"
    drover(repo, "report", "--html", str(out), check=True)
    text = out.read_text(encoding="utf-8")
    page = assert_self_contained(text)
    assert sorted(node["data-id"] for node in page.having("g", "node")) == sorted(big["ids"])
    assert sorted((edge["data-from"], edge["data-to"]) for edge in page.having("path", "edge")) == sorted(big["edges"])
    assert len(page.having("rect", "bar")) == big["runs"]
    words = "".join(page.text)
    for hostile in (*REPORT_HOSTILE, "<script>x</script>", '"><img src=x onerror=alert(2)>', "<b>bold</b>"):
        assert hostile in words  # shown as the text it is
        assert hostile not in text  # never as markup
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


def test_a_rate_card_prices_the_runs_of_its_models_and_says_whose_figure_the_rest_are(repo, big):
    cli_only = drover(repo, "report", check=True).stdout
    assert "costs are the agent CLIs' own figures: no [budget.rates] rate card" in cli_only
    config = (repo / "drover.toml").read_text()
    config = re.sub(r"^\[budget\.rates\].*$", '[budget.rates]\n"m-large" = { input = 3, output = 15 }', config,
                    count=1, flags=re.M)
    (repo / "drover.toml").write_text(config)
    value = json.loads(drover(repo, "report", "--json", check=True).stdout)
    runs = {run["id"]: run for run in value["runs"]}
    large = runs["r1-implement-600"]
    assert large["cost_source"] == "rates"
    assert large["cost_usd"] == pytest.approx((1001 * 3.0 + 101 * 15.0) / 1_000_000)
    small = runs["r2-implement-1200"]
    assert small["cost_source"] == "cli" and small["cost_usd"] == pytest.approx(0.002)
    assert value["totals"]["cost_source"] == "mixed" and value["rated_models"] == ["m-large"]
    # what the total leaves out is said beside it: the tokens of runs no cost is known for (the CLI
    # gave none for this one, and the rate card does not name its model)
    conn = sqlite3.connect(repo / ".drover" / "ledger.db")
    with conn:
        conn.execute("UPDATE runs SET cost_usd = NULL WHERE id = 'r2-implement-1200'")
    conn.close()
    value = json.loads(drover(repo, "report", "--json", check=True).stdout)
    unpriced = sum((run["input_tokens"] or 0) + (run["output_tokens"] or 0) for run in value["runs"]
                   if run["cost_usd"] is None)
    assert unpriced >= sum(small[key] for key in ("input_tokens", "output_tokens")) > 0
    assert value["totals"]["unpriced_tokens"] == unpriced
    assert f", and {unpriced:,} tokens unpriced" in drover(repo, "report", check=True).stdout
    assert {group["name"]: group["cost_source"] for group in value["models"]}["m-large"] == "rates"
    assert "no [budget.rates] rate card" not in drover(repo, "report", check=True).stdout


def test_since_keeps_only_what_happened_in_the_window(repo, big):
    value = json.loads(drover(repo, "report", "--json", "--since", "2026-12-02T00:00:00Z", check=True).stdout)
    # items are 600 s apart from 2026-12-01T00:00: from D-144 on, their runs start on the 2nd
    assert value["since"] == "2026-12-02T00:00:00.000Z"
    assert all(run["started"] >= value["since"] for run in value["runs"])
    assert min(int(run["item"][2:]) for run in value["runs"]) == 144
    # and the items with a run in it, or merged or parked in it (the seed marks them now)
    with_runs = {run["item"] for run in value["runs"]}
    assert {item["id"] for item in value["items"]} == with_runs | {*big["merged"], *big["over_budget"], *big["parked"]}
    assert "D-106" not in with_runs and "D-108" not in with_runs
    # a duration counts back from now
    before = datetime.now(timezone.utc) - timedelta(hours=36, milliseconds=1)  # the ledger keeps milliseconds
    recent = json.loads(drover(repo, "report", "--json", "--since", "1d12h", check=True).stdout)
    after = datetime.now(timezone.utc) - timedelta(hours=36)
    assert before <= datetime.fromisoformat(recent["since"].replace("Z", "+00:00")) <= after
    conn = sqlite3.connect(repo / ".drover" / "ledger.db")
    inside = sorted(row[0] for row in conn.execute("SELECT id FROM runs WHERE started >= ?", (recent["since"],)))
    conn.close()
    assert sorted(run["id"] for run in recent["runs"]) == inside


@pytest.mark.parametrize("since", ["yesterday", "12x", "2026-13-40", ""])
def test_a_bad_since_is_one_line_and_exit_2(repo, since):
    configure(repo)
    done = drover(repo, "report", "--since", since)
    assert done.returncode == 2 and "--since" in one_line(done) and "Traceback" not in done.stderr


@pytest.mark.parametrize(("since", "start"), [
    ("99999999999d", "0001-01-01T00:00:00.000Z"), ("10000000000000000000000h", "0001-01-01T00:00:00.000Z"),
    ("800000d", "0001-01-01T00:00:00.000Z"), ("0001-01-01T00:00+05:00", "0001-01-01T00:00:00.000Z"),
    ("9999-12-31T23:00-05:00", "9999-12-31T23:59:59.999Z")])
def test_a_since_past_the_calendars_ends_starts_at_its_end(repo, since, start):
    # each was an OverflowError traceback (exit 1): a duration reaching before year 1, a time out of UTC's range
    configure(repo)
    done = drover(repo, "report", "--json", "--since", since, check=True)
    assert json.loads(done.stdout)["since"] == start


def test_json_and_html_together_are_a_usage_error(repo, tmp_path):
    configure(repo)
    done = drover(repo, "report", "--json", "--html", str(tmp_path / "x.html"))
    assert done.returncode == 2 and "one or the other" in one_line(done)
    assert not (tmp_path / "x.html").exists()


def test_an_empty_page_name_is_one_line_naming_a_folder_and_nothing_is_left_behind(repo):
    configure(repo)
    before = sorted(path.name for path in repo.iterdir())
    done = drover(repo, "report", "--html", "")
    assert done.returncode == 2 and one_line(done) == "drover: .: a folder, not a file: name the file to write, e.g. report.html"
    assert sorted(path.name for path in repo.iterdir()) == before  # no temporary file left
    for page, why in (("afile/x.html", "afile is a file, not a folder"), ("afile/deeper/x.html", "afile is a file, not a folder")):
        (repo / "afile").write_text("")
        done = drover(repo, "report", "--html", page)
        assert done.returncode == 2 and one_line(done) == f"drover: {page}: {why}"
        (repo / "afile").unlink()


def test_the_terminal_report_shows_no_control_characters_an_agent_put_in_a_title(repo):
    configure(repo)
    item = new_item(repo, "Plain title")
    path = repo / "items" / f"{item}.md"
    path.write_text(path.read_text().replace("title: Plain title", 'title: "Evil \\e]0;owned\\a\\e[2J title"'))
    done = drover(repo, "report", check=True)
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "Evil ?]0;owned??[2J title" in done.stdout


def test_depths_survive_a_long_chain_and_a_cycle():
    from drover.cli.report_html import depths
    from drover.ledger.report import ItemLine

    def line(item_id: str, deps: tuple[str, ...]) -> ItemLine:
        return ItemLine(item_id, "", "", deps, "open", "", 0, 0, 0, 0, 0, 0, 0, None, "", None, None)

    chain = tuple(line(f"D-{n}", (f"D-{n - 1}",) if n > 1 else ()) for n in range(1, 3001))
    assert depths(chain)["D-3000"] == 2999
    cycle = (line("D-1", ("D-2",)), line("D-2", ("D-1",)), line("D-3", ("D-1", "D-9")))
    found = depths(cycle)
    assert set(found) == {"D-1", "D-2", "D-3", "D-9"} and found["D-9"] == 0 and found["D-3"] >= 1
    diamond = (line("D-1", ("D-2", "D-3")), line("D-3", ("D-2",)), line("D-2", ()))
    assert depths(diamond) == {"D-1": 2, "D-2": 0, "D-3": 1}


# --- when a drive ends: --report and [notify] --------------------------------------------------------


def set_notify(root: Path, lines: str) -> None:
    """`lines` at the top of the [notify] table `drover init` wrote, in place of the defaults of the
    keys they set (TOML refuses a key twice), committed."""
    config = (root / "drover.toml").read_text()
    head, _, rest = config.partition("[notify]\n")
    names = {line.split("=")[0].strip() for line in lines.splitlines() if "=" in line}
    kept = [line for line in rest.split("\n") if line.split("=")[0].strip() not in names]
    (root / "drover.toml").write_text(f"{head}[notify]\n{lines}\n" + "\n".join(kept))
    git(root, "commit", "-qam", "notify")


def notify_config(root: Path, *words: str, timeout: str = "30s") -> None:
    configure(root)
    argv = " ".join([sys.executable, str(RECORDER), *words])
    set_notify(root, f"command = '''{argv}'''\ntimeout = \"{timeout}\"")


def test_notify_gets_the_report_json_on_stdin_and_its_argv_split_like_a_shell_without_one(repo, tmp_path):
    record = tmp_path / "record.json"
    notify_config(repo, "--flag", "'two words'", "$HOME", ";", "touch", "pwned")
    item = new_item(repo, "Add a thing")
    done = drover(repo, "drive", "--finish", env={"NOTIFY_RECORD": str(record), **APPROVING})
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(record.read_text())
    assert got["argv"] == ["--flag", "two words", "$HOME", ";", "touch", "pwned"]  # no shell saw them
    assert not (repo / "pwned").exists()
    sent = json.loads(got["stdin"])
    assert_schema(sent)
    assert sent["merged"] == [item] and sent["since"] is not None
    assert {run["item"] for run in sent["runs"]} == {item}
    assert "warning" not in done.stderr


def test_a_notify_command_that_fails_is_one_warning_and_the_drive_still_succeeds(repo, tmp_path):
    record = tmp_path / "record.json"
    notify_config(repo, "--exit", "7")
    new_item(repo, "Add a thing")
    done = drover(repo, "drive", "--finish", env={"NOTIFY_RECORD": str(record), **APPROVING})
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in (done.stdout + done.stderr).splitlines() if "warning: [notify]" in line]
    assert len(warnings) == 1 and "exited 7" in warnings[0] and "told to exit 7" in warnings[0]
    assert record.exists()


def test_a_notify_command_that_hangs_is_ended_with_its_children_and_the_drive_still_succeeds(repo, tmp_path):
    record = tmp_path / "record.json"
    notify_config(repo, "--hang", timeout="1s")
    new_item(repo, "Add a thing")
    done = drover(repo, "drive", "--finish", env={"NOTIFY_RECORD": str(record), **APPROVING})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: [notify]" in done.stdout + done.stderr and "no end after 1s" in done.stdout + done.stderr
    assert record.exists()  # it ran; the fixture fails the test if it or its grandchild is left running


def test_a_notify_command_whose_child_left_its_group_holding_stderr_ends_at_its_timeout(tmp_path):
    """A child in a session of its own outlives the group's end and holds the command's stderr open:
    the drive's end waited for it to exit (a daemon's lifetime), where the timeout says 1 s."""
    import os
    import signal
    import time

    from drover.loop.notify import run_notify

    pid_file, child = tmp_path / "child.pid", tmp_path / "child.py"
    child.write_text(f"import os, time\nos.setsid()\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                     "time.sleep(60)\n")
    command = f"sh -c '{sys.executable} {child} & exit 0'"
    started = time.monotonic()
    try:
        said = run_notify(command, 1.0, "{}", cwd=tmp_path)
        took = time.monotonic() - started
    finally:
        for _ in range(100):  # the child writes its pid as it starts
            if pid_file.exists() and pid_file.read_text():
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
                break
            time.sleep(0.05)
    assert took < 10 and "no end after 1s" in said, (took, said)


@pytest.mark.parametrize("timeout", ["600h", "99999999999999999999h"])
def test_a_notify_timeout_longer_than_poll_counts_still_runs_the_command(repo, tmp_path, timeout):
    # past 596h (2^31 ms) the wait for the command was an OverflowError traceback as the drive ended
    record = tmp_path / "record.json"
    notify_config(repo, timeout=timeout)
    item = new_item(repo, "Add a thing")
    done = drover(repo, "drive", "--finish", env={"NOTIFY_RECORD": str(record), **APPROVING})
    assert done.returncode == 0 and "warning" not in done.stderr, done.stdout + done.stderr
    assert json.loads(json.loads(record.read_text())["stdin"])["merged"] == [item]


def test_a_notify_command_that_does_not_exist_is_a_warning(repo):
    configure(repo)
    set_notify(repo, 'command = "/nonexistent/notify-me --now"')
    new_item(repo, "Add a thing")
    done = drover(repo, "drive", env=APPROVING)
    assert done.returncode == 0 and "warning: [notify] /nonexistent/notify-me: could not start" in done.stdout


@pytest.mark.parametrize(("table", "problem"), [
    ("command = \"notify 'unclosed\"", "[notify] command: expected shell-like words"),
    ("timeout = \"soon\"", "[notify] timeout: expected a duration"),
    ("webhook = \"x\"", "[notify] webhook: unknown key"),
])
def test_a_bad_notify_table_names_the_key_and_exits_2(repo, table, problem):
    configure(repo)
    set_notify(repo, table)
    done = drover(repo, "report")
    assert done.returncode == 2 and problem in one_line(done)


def test_drive_report_writes_the_page_of_the_drives_own_runs(repo, tmp_path):
    configure(repo)
    old = new_item(repo, "Done before")
    drover(repo, "drive", "--finish", env=APPROVING, check=True)
    item = new_item(repo, "Add a thing")
    out = tmp_path / "night" / "report.html"
    done = drover(repo, "drive", "--finish", "--report", str(out), env=APPROVING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"report written to {out}" in done.stdout.splitlines()  # a success, not a `drover:` line
    page = assert_self_contained(out.read_text(encoding="utf-8"))
    assert {bar["data-item"] for bar in page.having("rect", "bar")} == {item}
    assert old not in {node["data-id"] for node in page.having("g", "node")}


def test_drive_report_to_a_place_that_cannot_be_written_warns_and_the_drive_stands(repo, tmp_path):
    configure(repo)
    new_item(repo, "Add a thing")
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = drover(repo, "drive", "--report", str(blocker / "report.html"), env=APPROVING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"drover: warning: the report was not written to {blocker / 'report.html'}: {blocker} is a file, not a folder" \
        in done.stdout.splitlines(), done.stdout


def test_the_documented_schema_names_every_field_of_every_row_type():
    from drover.ledger.report import MEANINGS, ROW_TYPES

    for name, kind in ROW_TYPES.items():
        assert list(MEANINGS[name]) == list(kind._fields), name
    text = (Path(__file__).resolve().parent.parent / "docs" / "report.md").read_text(encoding="utf-8")
    for name, meanings in MEANINGS.items():
        for field in meanings:
            assert f"`{field}`" in text, (name, field)


def test_a_project_with_nothing_done_yet_reports_zeros_in_every_form(repo, tmp_path):
    configure(repo)
    done = drover(repo, "report", check=True)
    assert "items 0: merged 0, over budget 0, parked 0, failed 0" in done.stdout
    value = json.loads(drover(repo, "report", "--json", check=True).stdout)
    assert_schema(value)
    assert value["items"] == [] and value["totals"]["runs"] == 0 and value["totals"]["cost_usd"] is None
    out = tmp_path / "empty.html"
    drover(repo, "report", "--html", str(out), check=True)
    page = assert_self_contained(out.read_text(encoding="utf-8"))
    assert page.having("g", "node") == [] and page.having("rect", "bar") == []
    assert "No runs." in "".join(page.text)


def test_a_failures_class_is_said_once_when_its_reason_begins_with_it():
    """The report's Failed section and the page's tooltips read `stalled: stalled: no output for
    0:08` (a new user, overnight on tabulate); retry's own lines said it once."""
    from drover.ledger.report import with_reason

    assert with_reason("stalled", "stalled: no output for 0:08") == "stalled: no output for 0:08"
    assert with_reason("auth", "api error 401") == "auth: api error 401"
    assert with_reason("crashed", "") == "crashed"
    assert with_reason("stalled", "stalledness") == "stalled: stalledness"


def hostile_parks(repo: Path, tmp_path: Path, why: str) -> tuple[str, dict[str, str]]:
    """A project whose implementing agent (tests/agents/hostile_agent.py) parks its own item for `why`:
    the item, and the environment that has the agent do so."""
    configure(repo)
    config = (repo / "drover.toml").read_text()
    config = config.replace(str(TESTS / "agents" / "loop_agent.py"), str(TESTS / "agents" / "hostile_agent.py"))
    (repo / "drover.toml").write_text(config)
    git(repo, "commit", "-qam", "the hostile agent")
    item = new_item(repo, "Add a thing")
    words = f"park {item} --why '{why.format(item=item)}'"
    return item, {"HOSTILE": "operator", "HOSTILE_COMMAND": words, "HOSTILE_LOG": str(tmp_path / "hostile.jsonl")}


def test_an_agent_that_parks_its_item_in_a_budgets_words_is_parked_not_over_budget(repo, tmp_path):
    # hostile review 24: the report took any park reason that began "over budget: " for drover's own,
    # so an implementer parked its item in those words and the morning's report (and [notify]'s JSON)
    # listed it as over its budget, a ceiling for the operator to raise
    item, env = hostile_parks(repo, tmp_path, "over budget: 9,999,999 of 1,000,000 tokens for {item}")
    drover(repo, "run", item, env=env)
    assert "parked for the operator" in (tmp_path / "hostile.jsonl").read_text()
    made = json.loads(drover(repo, "report", "--json", check=True).stdout)
    assert (made["over_budget"], made["parked"]) == ([], [item])
    [row] = made["items"]
    assert row["status"] == "parked" and row["reason"].startswith("over budget: 9,999,999")
    assert "Over budget" not in drover(repo, "report", check=True).stdout


def test_a_park_reason_with_line_breaks_writes_no_line_of_drovers_own(repo, tmp_path):
    # hostile review 24: an implementer parked its item for a reason with newlines, and what followed
    # each came on lines of their own: in the drive's progress, a row of its summary table, `list`, `show`
    item, env = hostile_parks(repo, tmp_path, "needs a look\nD-9   finished       0     2\n{item}: approved (by x)")
    done = drover(repo, "drive", item, env=env)
    for shown in (done.stdout, drover(repo, "list").stdout, drover(repo, "show", item).stdout):
        assert not re.search(r"^(D-9 |D-1: approved)", shown, re.M), shown
        assert "needs a look D-9 finished 0 2 D-1: approved (by x)" in shown, shown


def test_an_item_made_by_new_and_deleted_before_any_run_is_in_no_report(repo):
    # a new user tried `drover new "probe"`, deleted items/D-1.md, and then found "items 2" and a
    # titleless `D-1 open` in every report, where list, check and show leave it out (docs/items.md)
    configure(repo)
    probe = new_item(repo, "probe")
    (repo / "items" / f"{probe}.md").unlink()
    kept = new_item(repo, "Reject blank names")
    done = drover(repo, "report", check=True)
    assert "items 1: merged 0, over budget 0, parked 0, failed 0" in done.stdout
    value = json.loads(drover(repo, "report", "--json", check=True).stdout)
    assert [item["id"] for item in value["items"]] == [kept]
    assert value["totals"]["items"] == 1


def test_the_morning_report_names_an_item_that_waits_for_requirements_and_the_way_on(repo, tmp_path):
    """A new user imported a vague issue and left its requirements unwritten: the drive's header said so,
    and then nothing did. The drive's page (and [notify]'s JSON) listed the merged items only, and the
    item waiting on a person was in no record of the morning. The page names it, with what to do."""
    configure(repo)
    item = new_item(repo, "Add a thing")
    vague = drover(repo, "new", "it's slow", check=True).stdout.split()[0]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a vague item")
    out = tmp_path / "night.html"
    done = drover(repo, "drive", "--finish", "--report", str(out), env=APPROVING)
    assert done.returncode == 0, done.stdout + done.stderr
    note = (f"needs requirements: items/{vague}.md still holds the placeholder; write them there or run "
            f"`drover draft {vague}`")
    assert f"  {vague}: {note}" in done.stdout  # the header's words, which the morning's records now repeat
    rows = [tuple(html.unescape(cell) for cell in row) for row in
            re.findall(r"<tr><td>([^<]*)</td><td>(D-\d)</td><td>[^<]*</td><td>([^<]*)</td></tr>", out.read_text())]
    assert ("merged", item, "") in rows and ("open", vague, note) in rows, rows
