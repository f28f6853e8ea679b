"""drover.agents.launch: presets checked against the real CLIs, argv, environment, and launching."""
from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from drover.agents import launch as agents, presets
from drover.agents.environment import agent_env, drover_bin_dir
from drover.agents.launch import launch
from drover.agents.procs import pid_alive
from drover.agents.presets import PRESETS, PROMPT_FILE, agent_argv, binary_missing
from drover.config import AgentConfig
from drover.errors import ConfigError

AGENTS = Path(__file__).parent / "agents"
ECHO = AGENTS / "echo_agent.py"
SLEEPER = AGENTS / "sleeper.py"
DRIVER = AGENTS / "driver.py"
LINE_PREFIX = re.compile(r"^\[D-1 implement \d+:\d\d\] ")


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for init to reap it counts as gone)."""
    if not pid_alive(pid):
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def wait_until(condition, timeout: float = 60.0) -> bool:
    """condition() turns true within `timeout`: a bound for a loaded machine (three test processes on
    two cores have kept a driver from starting its agent for over 10 s), not a measure of speed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def pidfile(tmp_path):
    """Where sleeper.py records its pid and its grandchild's; anything left is killed afterwards."""
    path = tmp_path / "pids"
    yield path
    if path.exists():
        for pid in map(int, path.read_text().split()):
            try:
                # Only our own sleepers: the pid may have gone and been reused since.
                if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def recorded_pids(path: Path) -> tuple[int, int]:
    assert wait_until(path.exists), "the sleeper never recorded its pids"
    agent_pid, grandchild_pid = map(int, path.read_text().split())
    return agent_pid, grandchild_pid


def run(argv, tmp_path, **overrides):
    options = dict(cwd=tmp_path, env_add={}, prompt="the prompt", prompt_via="stdin",
                   log_path=tmp_path / "run" / "agent.log", timeout=None, label="D-1 implement", echo=False)
    options.update(overrides)
    return launch([str(word) for word in argv], **options)


# presets and argv -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("preset", "argv", "via"),
    [
        ("claude", ["claude", "-p", "--permission-mode", "bypassPermissions", "--output-format", "stream-json",
                    "--verbose"], "stdin"),
        ("codex", ["codex", "exec", "--sandbox", "danger-full-access", "--color", "never", "--json",
                   "-c", "allow_login_shell=false", "-"], "stdin"),
        ("aider", ["aider", "--message-file", "/runs/1/prompt.md", "--yes-always", "--no-gitignore",
                   "--no-dirty-commits", "--no-check-update", "--no-pretty"], "file"),
        ("gemini", ["gemini", "--prompt", "", "--approval-mode", "yolo", "--skip-trust"], "stdin"),
        ("opencode", ["opencode", "run", "--auto"], "stdin"),
        ("demo", [sys.executable, "-m", "drover.cli.demo", "agent"], "stdin"),
    ],
)
def test_preset_argv_and_how_the_prompt_travels(preset, argv, via):
    assert agent_argv(AgentConfig(preset=preset), Path("/runs/1/prompt.md")) == (argv, via)


def test_command_replaces_the_preset_argv_without_a_shell():
    agent = AgentConfig(preset="claude", command="claude -p --model 'opus 4' ; rm -rf x")
    assert agent_argv(agent, Path("p.md")) == (["claude", "-p", "--model", "opus 4", ";", "rm", "-rf", "x"], "stdin")


def test_command_placeholders_choose_file_or_arg():
    by_file = AgentConfig(preset="script", command="my-agent --prompt-file={prompt_file}")
    assert agent_argv(by_file, Path("/r/prompt.md")) == (["my-agent", "--prompt-file=/r/prompt.md"], "file")
    by_arg = AgentConfig(preset="script", command="my-agent --say {prompt}")
    assert agent_argv(by_arg, Path("/r/prompt.md")) == (["my-agent", "--say", "{prompt}"], "arg")


def test_script_preset_needs_a_command():
    with pytest.raises(ConfigError, match=r"\[agent\] command: the script preset"):
        agent_argv(AgentConfig(preset="script"), Path("p.md"))


def test_unbalanced_quotes_in_command_are_a_config_error():
    with pytest.raises(ConfigError, match=r"drover.toml: \[agent\] command: No closing quotation"):
        agent_argv(AgentConfig(preset="script", command="agent 'unclosed"), Path("p.md"))


def test_binary_missing_names_the_preset_and_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert binary_missing(AgentConfig(preset="claude")) == (
        "claude is not installed: npm install -g @anthropic-ai/claude-code")
    assert binary_missing(AgentConfig(preset="codex")) == "codex is not installed: npm install -g @openai/codex"
    assert binary_missing(AgentConfig(preset="script", command="my-agent --x")) == (
        "my-agent (from [agent] command) is not installed or not on PATH")
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert binary_missing(AgentConfig(preset="claude")) == ""
    assert binary_missing(AgentConfig(preset="claude", command="claude -p")) == ""
    assert binary_missing(AgentConfig(preset="demo")) == ""


# every preset that runs an outside CLI (not demo, which is this interpreter, nor script, which has no argv)
@pytest.mark.parametrize("name", [name for name, preset in PRESETS.items() if preset.argv and preset.binary != sys.executable])
def test_preset_flags_appear_in_the_real_clis_help(name):
    """Every flag (and flag value) a preset passes is one the installed CLI documents."""
    preset = PRESETS[name]
    binary = shutil.which(preset.binary)
    if binary is None:
        pytest.skip(f"{preset.binary} is not installed (put it on PATH to check this preset)")
    words = list(preset.argv[1:])
    subcommands = []
    while words and not words[0].startswith("-"):
        subcommands.append(words.pop(0))
    # `-c key=value` overrides a config key: the flag must be documented, the value must be
    # key=value, and the CLI must accept it (it is passed along with --help).
    overrides = []
    for index, word in enumerate(words):
        if word == "-c" and index + 1 < len(words):
            assert re.fullmatch(r"[\w.]+=\S+", words[index + 1]), f"-c {words[index + 1]} is not key=value"
            overrides += ["-c", words[index + 1]]
    done = subprocess.run([binary, *subcommands, *overrides, "--help"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=180)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    missing = []
    for index, word in enumerate(words):
        if word in ("", PROMPT_FILE) or (index and words[index - 1] == "-c"):
            continue
        if word == "-":
            present = "`-`" in text  # how `codex exec --help` documents reading stdin
        else:
            present = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None
        if not present:
            missing.append(word)
    assert not missing, f"{name} --help does not mention {missing}"


# environment --------------------------------------------------------------------------------

def test_agent_env_adds_the_drover_variables(tmp_path, monkeypatch):
    monkeypatch.delenv("GIT_CONFIG_COUNT", raising=False)
    env = agent_env(item_id="D-1", slot="review", run_id="r1", prompt_file=tmp_path / "prompt.md", repo=tmp_path)
    assert {key: env[key] for key in env if key != "PATH"} == {
        "DROVER_ITEM": "D-1", "DROVER_SLOT": "review", "DROVER_RUN": "r1",
        "DROVER_PROMPT_FILE": str(tmp_path / "prompt.md"), "DROVER_REPO": str(tmp_path),
        "DROVER_WORKTREE": str(tmp_path), "DROVER_BASE": "", "DROVER_BRANCH": "", "DROVER_ROUND": "0",
        "DROVER_POSTURE": "", "DROVER_VERIFY": "", "PYTHONSAFEPATH": "1",
        # a review's git reads the commits themselves and runs none of the shared config's programs
        "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull, "GIT_CONFIG_COUNT": "15",
        "GIT_CONFIG_KEY_0": "maintenance.auto", "GIT_CONFIG_VALUE_0": "false",
        "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
        "GIT_CONFIG_KEY_2": "core.hooksPath", "GIT_CONFIG_VALUE_2": os.devnull,
        "GIT_CONFIG_KEY_3": "core.pager", "GIT_CONFIG_VALUE_3": "cat",
        "GIT_CONFIG_KEY_4": "core.attributesFile", "GIT_CONFIG_VALUE_4": os.devnull,
        "GIT_CONFIG_KEY_5": "advice.graftFileDeprecated", "GIT_CONFIG_VALUE_5": "false",
        "GIT_CONFIG_KEY_6": "log.showSignature", "GIT_CONFIG_VALUE_6": "false",
        "GIT_CONFIG_KEY_7": "gpg.program", "GIT_CONFIG_VALUE_7": "gpg",
        "GIT_CONFIG_KEY_8": "gpg.openpgp.program", "GIT_CONFIG_VALUE_8": "gpg",
        "GIT_CONFIG_KEY_9": "gpg.x509.program", "GIT_CONFIG_VALUE_9": "gpgsm",
        "GIT_CONFIG_KEY_10": "gpg.ssh.program", "GIT_CONFIG_VALUE_10": "ssh-keygen",
        "GIT_CONFIG_KEY_11": "core.bigFileThreshold", "GIT_CONFIG_VALUE_11": "512m",
        "GIT_CONFIG_KEY_12": "diff.ignoreSubmodules", "GIT_CONFIG_VALUE_12": "none",
        "GIT_CONFIG_KEY_13": "i18n.logOutputEncoding", "GIT_CONFIG_VALUE_13": "UTF-8",
        "GIT_CONFIG_KEY_14": "core.useReplaceRefs", "GIT_CONFIG_VALUE_14": "false",
        "GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1",
    }
    # a worker fills in its own machine's part of what the coordinator prepared: a review's pins too
    from drover.agents.environment import on_this_machine

    worker = on_this_machine(env, prompt_file=tmp_path / "w.md", repo=tmp_path, workdir=tmp_path)
    assert {key: worker[key] for key in worker if key.startswith("GIT_")} == {
        key: env[key] for key in env if key.startswith("GIT_")}
    implementing = agent_env(item_id="D-1", slot="implement", run_id="r1", prompt_file=tmp_path / "prompt.md",
                             repo=tmp_path)
    assert (implementing["GIT_CONFIG_COUNT"], implementing["GIT_CONFIG_KEY_0"]) == ("1", "maintenance.auto")
    assert "PYTHONSAFEPATH" not in implementing and "GIT_NO_REPLACE_OBJECTS" not in implementing


def test_docs_agents_md_names_every_variable_an_agent_is_given(tmp_path, monkeypatch):
    """docs/agents.md's table of the agent's environment says what agent_env adds, for either slot
    (a GIT_CONFIG_KEY_n and its value are named by the row of GIT_CONFIG_COUNT)."""
    monkeypatch.delenv("GIT_CONFIG_COUNT", raising=False)
    doc = (Path(__file__).resolve().parent.parent / "docs" / "agents.md").read_text(encoding="utf-8")
    table = doc.split("## The agent's environment", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([A-Z_]+)`", table, re.M)) | set(re.findall(r"`([A-Z_]+)(?:_n)?`", table))
    for slot in ("implement", "review"):
        added = agent_env(item_id="D-1", slot=slot, run_id="r1", prompt_file=tmp_path / "prompt.md", repo=tmp_path)
        unnamed = sorted(key for key in added if re.sub(r"_\d+$", "", key) not in named)
        assert unnamed == [], slot


def own_run() -> str:
    """A run id no other test uses: a run's end ends every process carrying its `DROVER_RUN`, and
    tests on other workers run git under their own marks meanwhile."""
    return f"r-{uuid.uuid4().hex}"


def test_the_agents_git_starts_no_maintenance_and_keeps_the_config_drover_was_given(tmp_path, monkeypatch):
    """A `gc --auto` an agent's commit started would be ended with the run's other processes; the
    operator's own `GIT_CONFIG_*` entries stay, the agent's one is added after them."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "operator.mark")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "Operator")
    env = agent_env(item_id="D-1", slot="implement", run_id=own_run(), prompt_file=tmp_path / "p", repo=tmp_path)
    assert (env["GIT_CONFIG_COUNT"], env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("2", "maintenance.auto", "false")
    assert "GIT_CONFIG_KEY_0" not in env  # the operator's, inherited as it was
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    seen = subprocess.run(["git", "config", "--get-regexp", "^(operator.mark|maintenance.auto)$"], cwd=tmp_path / "repo",
                          env={**os.environ, **env, "GIT_CONFIG_GLOBAL": os.devnull},  # the test's own turns it off too
                          capture_output=True, text=True, check=True).stdout
    assert seen.splitlines() == ["operator.mark Operator", "maintenance.auto false"]


def test_agent_path_reaches_this_drover_first_and_nothing_else_of_its_folder(tmp_path, monkeypatch):
    """drover's folder is often a virtual environment's: put in front of the agent's PATH whole, its
    python, pip and pytest shadowed the project's for the agent, while `[run] setup` and drover's
    check ran the project's. What goes in front is a folder holding a link to this drover alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ours = drover_bin_dir()
    assert ours is not None and (ours / "drover").exists() and (ours / "python").exists()
    impostor = tmp_path / "bin"
    impostor.mkdir()
    (impostor / "drover").write_text("#!/bin/sh\necho wrong drover\n")
    (impostor / "drover").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(impostor), "/usr/bin", "/bin"]))
    env = agent_env(item_id="D-1", slot="implement", run_id=own_run(), prompt_file=tmp_path / "p", repo=tmp_path)
    front, after = env["PATH"].split(os.pathsep)[:2]
    assert after == str(impostor)
    assert os.listdir(front) == ["drover"] and os.path.samefile(Path(front) / "drover", ours / "drover")
    assert shutil.which("python", path=env["PATH"]) != str(ours / "python")  # the project's python, not drover's
    # a second launch finds the link made already, and nothing beside it: a program an agent put there
    # (a `reviewer-cli`, a `git`) would come first on every later agent's PATH, the review's included
    (Path(front) / "reviewer-cli").write_text("#!/bin/sh\necho planted\n")
    (Path(front) / "reviewer-cli").chmod(0o755)
    again = agent_env(item_id="D-1", slot="implement", run_id=own_run(), prompt_file=tmp_path / "p", repo=tmp_path)
    assert again["PATH"] == env["PATH"] and os.listdir(front) == ["drover"]
    # and the agent's own program is the one the operator's PATH names, whatever the agent's PATH holds
    (Path(front) / "reviewer-cli").write_text("#!/bin/sh\necho planted\n")
    (Path(front) / "reviewer-cli").chmod(0o755)
    (impostor / "reviewer-cli").write_text("#!/bin/sh\necho from the operator\n")
    (impostor / "reviewer-cli").chmod(0o755)
    result = run(["reviewer-cli"], tmp_path, env_add=env)
    assert result.exit_code == 0 and "from the operator" in (tmp_path / "run" / "agent.log").read_text()
    # When PATH already finds it first, PATH is left as it was.
    monkeypatch.setenv("PATH", os.pathsep.join([str(ours), "/usr/bin"]))
    env = agent_env(item_id="D-1", slot="implement", run_id=own_run(), prompt_file=tmp_path / "p", repo=tmp_path)
    assert env["PATH"] == os.pathsep.join([str(ours), "/usr/bin"])


def _program(folder: Path, name: str, says: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"#!/bin/sh\necho {says}\n")
    (folder / name).chmod(0o755)


def test_a_relative_path_entry_is_drovers_folder_not_the_agents(tmp_path, monkeypatch):
    """A relative PATH entry (`node_modules/.bin`, `.`, an empty one) names a folder of drover's
    working folder, the main checkout. The agent starts in its worktree, where the same name is the
    implementer's: its program, and every entry of its PATH, are the ones drover's folder has."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    main, worktree = tmp_path / "main", tmp_path / "worktree"
    for root, says in ((main, "from the operator"), (worktree, "planted")):
        _program(root / "node_modules" / ".bin", "reviewer-cli", says)
        _program(root, "helper", says)
    monkeypatch.chdir(main)
    monkeypatch.setenv("PATH", os.pathsep.join(["node_modules/.bin", "", "/usr/bin", "/bin"]))
    env = agent_env(item_id="D-1", slot="review", run_id=own_run(), prompt_file=tmp_path / "p", repo=main)
    entries = env["PATH"].split(os.pathsep)
    assert all(os.path.isabs(entry) for entry in entries), entries
    assert str(main / "node_modules" / ".bin") in entries and str(main) in entries
    log = tmp_path / "run" / "agent.log"
    result = run(["reviewer-cli"], tmp_path, cwd=worktree, env_add=env)
    assert result.exit_code == 0 and "from the operator" in log.read_text() and "planted" not in log.read_text()
    log.unlink()
    result = run(["sh", "-c", "helper"], tmp_path, cwd=worktree, env_add=env)  # found on the agent's PATH
    assert result.exit_code == 0 and "from the operator" in log.read_text() and "planted" not in log.read_text()


def _replaced(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose commit "the real work" a `git replace` shows as "a harmless stand-in", its
    newer commit: (the repository, the real commit's id)."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for subject in ("the real work", "a harmless stand-in"):
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", subject], cwd=repo, check=True)
    real, stand_in = (subprocess.run(["git", "rev-parse", ref], cwd=repo, capture_output=True, text=True,
                                     check=True).stdout.strip() for ref in ("HEAD~1", "HEAD"))
    subprocess.run(["git", "replace", real, stand_in], cwd=repo, check=True)
    return repo, real


def test_a_reviewers_git_reads_the_commits_themselves(tmp_path, monkeypatch):
    """`git replace` (refs the implementer can write) showed the reviewer's git another commit under
    the id under review; and a monitor the shared config names would run inside the review run."""
    repo, real = _replaced(tmp_path)
    monitor = tmp_path / "monitored"
    subprocess.run(["git", "config", "core.fsmonitor", f"touch {monitor}; true"], cwd=repo, check=True)
    env = {**os.environ, **agent_env(item_id="D-1", slot="review", run_id=own_run(), prompt_file=tmp_path / "p", repo=repo)}
    shown = subprocess.run(["git", "log", "-1", "--format=%s", real], cwd=repo, env=env, capture_output=True,
                           text=True, check=True).stdout
    assert shown == "the real work\n"
    (repo / "file.txt").write_text("one\n")
    subprocess.run(["git", "add", "file.txt"], cwd=repo, env=env, check=True)
    (repo / "file.txt").write_text("two\n")
    assert "+two" in subprocess.run(["git", "diff"], cwd=repo, env=env, check=True, capture_output=True,
                                    text=True).stdout  # the reviewer's diffs still work
    assert not monitor.exists()
    implementing = {**os.environ, **agent_env(item_id="D-1", slot="implement", run_id=own_run(),
                                              prompt_file=tmp_path / "p", repo=repo)}
    assert subprocess.run(["git", "log", "-1", "--format=%s", real], cwd=repo, env=implementing, capture_output=True,
                          text=True, check=True).stdout == "a harmless stand-in\n"  # the replacement is live


def test_replacements_the_shared_config_turns_back_on_stay_off_for_drovers_git_and_the_reviewers(tmp_path):
    """Hostile review 50: `core.useReplaceRefs = true` in the shared `.git/config` (the implementer's
    to write) turns git's replacements back on over GIT_NO_REPLACE_OBJECTS, so `git replace` showed
    drover's git and the reviewer's another commit under the id under review again, and an answer
    about that id kept for the process (history.of_ids) held what the replacement showed."""
    from drover.git.run import git

    repo, real = _replaced(tmp_path)
    subprocess.run(["git", "config", "core.useReplaceRefs", "true"], cwd=repo, check=True)
    env = {**os.environ, **agent_env(item_id="D-1", slot="review", run_id=own_run(), prompt_file=tmp_path / "p", repo=repo)}
    shown = subprocess.run(["git", "log", "-1", "--format=%s", real], cwd=repo, env=env, capture_output=True,
                           text=True, check=True).stdout
    assert shown == "the real work\n"
    assert git(["log", "-1", "--format=%s", real], repo) == "the real work\n"


def test_the_agent_sees_the_environment_additions(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = agent_env(item_id="D-1", slot="implement", run_id="r-7", prompt_file=tmp_path / "prompt.md", repo=tmp_path)
    result = run([sys.executable, ECHO], tmp_path, env_add=env)
    log = (tmp_path / "run" / "agent.log").read_text()
    assert result.exit_code == 0
    for key in ("DROVER_ITEM=D-1", "DROVER_SLOT=implement", "DROVER_RUN=r-7",
                f"DROVER_PROMPT_FILE={tmp_path / 'prompt.md'}", f"DROVER_REPO={tmp_path}"):
        assert f"env: {key}\n" in log
    said = next(line for line in log.splitlines() if line.startswith("which drover: "))
    assert os.path.samefile(said.removeprefix("which drover: "), drover_bin_dir() / "drover")


# launching ----------------------------------------------------------------------------------

def test_output_streams_to_the_log_as_it_arrives_and_to_the_screen(tmp_path):
    go = tmp_path / "go"
    screen = io.StringIO()
    log = tmp_path / "run" / "agent.log"
    results = []
    worker = threading.Thread(target=lambda: results.append(
        run([sys.executable, ECHO, "--wait-for", go], tmp_path, echo=True, out=screen)))
    worker.start()
    try:
        # "first" reaches the log while the agent is still running (it waits for `go`).
        assert wait_until(lambda: log.exists() and "first\n" in log.read_text())
        assert worker.is_alive() and "second" not in log.read_text()
    finally:
        go.write_text("")
        worker.join(30)
    assert results and results[0].outcome == "exited" and results[0].exit_code == 0
    text = log.read_text()
    assert "first\nsecond\nstdin: the prompt\n" in text
    assert "to stderr\n" in text  # stderr joins stdout in the one log
    shown = screen.getvalue().splitlines()
    assert all(LINE_PREFIX.match(line) for line in shown)
    assert [LINE_PREFIX.sub("", line) for line in shown[:3]] == ["first", "second", "stdin: the prompt"]


def test_exit_code_is_recorded(tmp_path):
    result = run([sys.executable, ECHO, "--exit", "3"], tmp_path)
    assert (result.exit_code, result.outcome) == (3, "exited")
    assert result.elapsed > 0


def test_prompt_by_file_leaves_stdin_empty(tmp_path):
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text("prompt in a file")
    agent = AgentConfig(preset="script", command=f"{sys.executable} {ECHO} --file {PROMPT_FILE}")
    argv, via = agent_argv(agent, prompt_file)
    result = run(argv, tmp_path, prompt_via=via, prompt="prompt in a file")
    log = (tmp_path / "run" / "agent.log").read_text()
    assert result.exit_code == 0
    assert "file: prompt in a file\n" in log and "stdin: (empty)\n" in log


def test_prompt_as_an_argument(tmp_path):
    agent = AgentConfig(preset="script", command=f"{sys.executable} {ECHO} {{prompt}}")
    argv, via = agent_argv(agent, tmp_path / "prompt.md")
    run(argv, tmp_path, prompt_via=via, prompt="do {{ this }} exactly")
    assert "word: do {{ this }} exactly\n" in (tmp_path / "run" / "agent.log").read_text()


def test_a_large_prompt_on_stdin_does_not_deadlock(tmp_path):
    prompt = "x" * 300_000  # several pipe buffers
    result = run([sys.executable, ECHO], tmp_path, prompt=prompt, timeout=60)
    assert result.outcome == "exited"
    assert f"stdin: {prompt}\n" in (tmp_path / "run" / "agent.log").read_text()


def test_timeout_ends_the_whole_process_group(tmp_path, pidfile):
    started = []
    result = run([sys.executable, SLEEPER, pidfile], tmp_path, timeout=1.5, grace=2, on_start=started.append)
    agent_pid, grandchild_pid = recorded_pids(pidfile)
    assert result.outcome == "timeout"
    assert result.exit_code == -signal.SIGTERM
    assert 1.5 <= result.elapsed < 30
    assert started == [agent_pid]
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid))
    log = (tmp_path / "run" / "agent.log").read_text()
    assert log.startswith("ready\n")
    assert re.search(r"\n\[drover\] timed out after 0:0\d: ended its processes\n$", log)


def test_sigterm_ignored_is_followed_by_sigkill(tmp_path, pidfile):
    result = run([sys.executable, SLEEPER, pidfile, "--ignore-term"], tmp_path, timeout=1, grace=0.5)
    agent_pid, grandchild_pid = recorded_pids(pidfile)
    assert (result.outcome, result.exit_code) == ("timeout", -signal.SIGKILL)
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid))


def test_what_an_agent_leaves_running_is_ended_when_it_exits(tmp_path, pidfile):
    result = run([sys.executable, SLEEPER, pidfile, "--exit-early"], tmp_path, grace=2)
    _, grandchild_pid = recorded_pids(pidfile)
    assert (result.outcome, result.exit_code) == ("exited", 0)
    assert result.elapsed < 30
    assert wait_until(lambda: gone(grandchild_pid))


def test_cancel_event_interrupts(tmp_path, pidfile):
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    result = run([sys.executable, SLEEPER, pidfile], tmp_path, cancel=cancel, grace=2)
    agent_pid, grandchild_pid = recorded_pids(pidfile)
    assert result.outcome == "interrupted"
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid))


def test_sigint_to_drover_ends_the_agents_group_and_is_reported(tmp_path, pidfile):
    driver = subprocess.Popen([sys.executable, str(DRIVER), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: pidfile.exists() or driver.poll() is not None, 30)
        assert driver.poll() is None, driver.communicate()
        agent_pid, grandchild_pid = recorded_pids(pidfile)
        assert pid_alive(agent_pid) and not gone(grandchild_pid)
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err
    assert f"started {agent_pid}\n" in out
    assert f"outcome interrupted -{int(signal.SIGTERM)}\n" in out
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid))
    assert "[drover] interrupted after" in (tmp_path / "agent.log").read_text()


# processes that leave the group (setsid, double fork) -----------------------------------------

def escaped_pids(path: Path) -> list[int]:
    assert wait_until(path.exists), "the sleeper never recorded its pids"
    pids = list(map(int, path.read_text().split()))
    assert len(pids) == 3
    return pids


@pytest.mark.parametrize("ending", ["exit", "timeout"])
def test_a_process_in_its_own_session_is_ended_with_the_run(tmp_path, pidfile, ending):
    args = ["--escape", "--exit-early"] if ending == "exit" else ["--escape"]
    # the timeout leaves the sleeper time to start its three processes on a loaded machine (at
    # 1.5 s, three test processes on two cores sometimes ended it before it wrote their pids)
    result = run([sys.executable, SLEEPER, pidfile, *args], tmp_path, grace=2,
                 timeout=None if ending == "exit" else 4, env_add={"DROVER_RUN": f"r-{ending}-{os.getpid()}"})
    agent_pid, grandchild_pid, escaped_pid = escaped_pids(pidfile)
    assert result.outcome == ("exited" if ending == "exit" else "timeout")
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid) and gone(escaped_pid))
    if sys.platform.startswith("linux"):
        # This process became the orphan's subreaper; it was reaped, not left a zombie.
        assert wait_until(lambda: not Path(f"/proc/{escaped_pid}").exists())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_end_a_process_in_its_own_session(tmp_path, pidfile, signum):
    driver = subprocess.Popen([sys.executable, str(DRIVER), str(tmp_path), "--escape"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        agent_pid, grandchild_pid, escaped_pid = escaped_pids(pidfile)
        assert os.getsid(escaped_pid) != os.getsid(agent_pid)  # it really left the agent's session
        driver.send_signal(signum)
        out, err = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err
    assert "outcome interrupted" in out
    assert wait_until(lambda: gone(agent_pid) and gone(grandchild_pid) and gone(escaped_pid))


# Ctrl-C lands while _signals_held puts the handlers back, right after SIGINT's: the moment a
# timing would have to hit, made certain by a signal.signal that sends it there.
_CTRL_C_AMID_RESTORE = """
import os, signal
from drover.agents import launch
# as a drover on a terminal starts: a test runner's worker may have left Ctrl-C ignored or blocked
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
real = signal.signal
def signal_then_ctrl_c(signum, handler):
    before = real(signum, handler)
    if signum == signal.SIGINT and handler is signal.default_int_handler:
        os.kill(os.getpid(), signal.SIGINT)
    return before
sigterm = signal.getsignal(signal.SIGTERM)
try:
    with launch._signals_held():
        signal.signal = signal_then_ctrl_c
except KeyboardInterrupt:
    print("interrupted")
signal.signal = real
print("sigterm put back" if signal.getsignal(signal.SIGTERM) is sigterm else "sigterm still held")
"""


def test_a_ctrl_c_while_held_signals_are_put_back_leaves_none_held():
    """Hostile review 49: a Ctrl-C between the two handlers' return raised there, and SIGTERM stayed
    held for the rest of the command (the operator's `kill` swallowed). Both are put back first."""
    done = subprocess.run([sys.executable, "-c", _CTRL_C_AMID_RESTORE], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["interrupted", "sigterm put back"], done.stdout + done.stderr


def test_processes_are_found_by_their_run_marker(tmp_path):
    from drover.agents.procs import marked_processes

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, "DROVER_RUN": "marker-test"}, start_new_session=True)
    try:
        assert wait_until(lambda: child.pid in marked_processes("DROVER_RUN", "marker-test"))
        assert marked_processes("DROVER_RUN", "marker-tes") == []  # the whole value, not a prefix
    finally:
        child.kill()
        child.wait()
    assert child.pid not in marked_processes("DROVER_RUN", "marker-test")


# A process that writes NULs over its own environment (its memory, /proc/self/mem), all but the
# first entry: megabytes of empty entries, as one under an agent can leave on the machine.
_NUL_ENVIRON = """
import sys, time
with open("/proc/self/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
start, end = int(fields[47]), int(fields[48])
with open("/proc/self/environ", "rb") as f:
    first = len(f.read().split(b"\\0")[0]) + 1
with open("/proc/self/mem", "r+b", buffering=0) as mem:
    mem.seek(start + first)
    mem.write(bytes(end - start - first))
print(end - start, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="processes are found through /proc")
def test_an_environment_of_a_million_empty_entries_is_searched_without_a_list_of_them(tmp_path):
    """Hostile review 48: the mark was looked for among the environment's entries split into a list,
    a Python object each: an agent's processes with megabytes of NULs made every look at the
    machine's processes (each set-up's, each run's end) seconds per hundred of them."""
    import tracemalloc

    from drover.agents.procs import marked_processes

    padding = {f"PAD{n}": "x" * 100_000 for n in range(12)}
    child = subprocess.Popen([sys.executable, "-c", _NUL_ENVIRON], stdout=subprocess.PIPE,
                             env={"DROVER_SETUP": "nul-test", **padding}, start_new_session=True)
    try:
        assert child.stdout is not None
        size = int(child.stdout.readline())
        assert size > 1_000_000
        tracemalloc.start()
        try:
            found = marked_processes("DROVER_SETUP", "nul-test")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert found == [child.pid]
        # the environment read, and a copy: not a list of a million entries (8 bytes each)
        assert peak < 4 * size, peak
    finally:
        child.kill()
        child.wait()


def test_a_program_that_cannot_start_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        run([tmp_path / "no-such-agent"], tmp_path)


def test_pid_alive(tmp_path):
    assert pid_alive(os.getpid())
    assert not pid_alive(0) and not pid_alive(None) and not pid_alive(-1)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0:00"), (12.9, "0:12"), (754, "12:34"), (3723, "1:02:03")])
def test_format_elapsed(seconds, shown):
    assert agents.format_elapsed(seconds) == shown


# root and sandboxes ---------------------------------------------------------------------------

def test_claude_bypass_mode_under_root_is_named_with_the_fixes():
    line = presets.root_refusal(AgentConfig(preset="claude"), uid=0, environ={})
    assert line == ("claude refuses bypassPermissions as root: if this machine is a sandbox set "
                    "[agent] sandboxed = true (drover then passes IS_SANDBOX=1), or run drover as another "
                    "user, or set [agent] command to a narrower permission mode")
    assert "\n" not in line


@pytest.mark.parametrize(("agent", "uid", "environ"), [
    (AgentConfig(preset="claude"), 1000, {}),  # not root
    (AgentConfig(preset="claude", sandboxed=True), 0, {}),  # the operator said so
    (AgentConfig(preset="claude"), 0, {"IS_SANDBOX": "1"}),  # claude's own switch, exported
    (AgentConfig(preset="claude", command="claude -p --permission-mode acceptEdits"), 0, {}),  # narrower
    (AgentConfig(preset="codex"), 0, {}),  # codex runs as root
])
def test_no_root_refusal_where_the_cli_will_start(agent, uid, environ):
    assert presets.root_refusal(agent, uid=uid, environ=environ) == ""


def test_a_command_with_the_bypass_flag_is_refused_too():
    agent = AgentConfig(preset="claude", command="/opt/bin/claude -p --dangerously-skip-permissions")
    assert presets.root_refusal(agent, uid=0, environ={}).startswith(
        "claude refuses --dangerously-skip-permissions as root")


def test_sandboxed_passes_what_the_cli_needs_and_nothing_unasked():
    assert presets.sandbox_env(AgentConfig(preset="claude", sandboxed=True)) == {"IS_SANDBOX": "1"}
    assert presets.sandbox_env(AgentConfig(preset="claude")) == {}
    assert presets.sandbox_env(AgentConfig(preset="codex", sandboxed=True)) == {}


# signs of life --------------------------------------------------------------------------------

def test_off_a_terminal_a_silent_agent_gets_progress_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("DROVER_PROGRESS_SECONDS", "0.3")
    heard = []
    result = run([sys.executable, "-c", "import time; print('working', flush=True); time.sleep(1.5)"], tmp_path,
                 progress=heard.append, progress_label="D-1: implement by claude")
    assert result.outcome == "exited"
    assert heard and all(re.fullmatch(r"D-1: implement by claude, \ds, log 8 B", line) for line in heard), heard


@pytest.mark.parametrize(("seconds", "shown"), [(45, "45s"), (250, "4m10s"), (3720, "1h02m")])
def test_progress_elapsed(seconds, shown):
    assert agents.short_elapsed(seconds) == shown


class TerminalScreen(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_status_line_shows_while_silent_and_stays_below_the_output(tmp_path, monkeypatch):
    monkeypatch.setattr(agents, "STATUS_AFTER", 0.2)
    screen = TerminalScreen()
    heard = []
    script = "import time; print('one', flush=True); time.sleep(1.0); print('two', flush=True); time.sleep(0.6)"
    result = run([sys.executable, "-c", script], tmp_path, echo=True, out=screen, progress=heard.append)
    assert result.outcome == "exited"
    text = screen.getvalue()
    assert re.search(r"\n\[D-1 implement 0:0\d\] silent for 0:0\d, log 4 B; last: one\n", text), text
    # Each line the agent printed starts a line, or follows the erased status block: never after a status.
    agent_lines = [line.rsplit("\x1b[J", 1)[-1] for line in text.split("\n") if line and "] silent for " not in line]
    assert [LINE_PREFIX.sub("", line) for line in agent_lines if LINE_PREFIX.match(line)] == ["one", "two"]
    assert text.endswith("\r\x1b[1A\x1b[J")  # the status line is erased when the run ends
    assert heard == []  # on a terminal the status line replaces the progress lines


def test_one_long_line_of_agent_output_is_held_at_most_to_its_cap(monkeypatch):
    """An agent that prints megabytes with no newline: each 64 KiB read used to re-split everything
    pending, quadratic in the line's length (64 MB took about 40 s, a few hundred MB hung a run
    until its timeout). What is pending now never passes LONGEST_LINE and one read, so each read's
    work is bounded whatever the agent prints; a line past the cap is taken as it stands."""
    import io

    from drover.agents import launch

    monkeypatch.setattr(launch, "LONGEST_LINE", 1 << 20)
    log = io.BytesIO()
    output = launch._Output(log, None, None, None)
    taken: list[int] = []
    original = output.line
    monkeypatch.setattr(output, "line", lambda line: (taken.append(len(line)), original(line)))
    chunk = b"a" * 65536
    most = 0
    for _ in range(64):  # 4 MiB on one line
        output.chunk(chunk)
        most = max(most, len(output.pending))
    output.chunk(b"b\nlast line\n")
    output.close()
    assert most <= (1 << 20) + len(chunk)
    assert len(taken) >= 4 and all(size > 1 << 20 for size in taken[:3])  # taken at the cap, not held
    assert output.last_line == "last line" and log.getbuffer().nbytes == 4 * 1024 * 1024 + 12


def test_a_run_lock_keeps_each_field_of_its_drover_in_place_when_one_is_unknown(tmp_path, monkeypatch):
    """The lock records the drover's pid, start, pid namespace and /proc mount; one that /proc could
    not say is written `-`, so the others are read back as what they are, not one place earlier."""
    from drover.agents import locks, procs

    monkeypatch.setattr(procs, "own_place", lambda: ("", procs.proc_mount()))
    with locks.attached(tmp_path):
        found = locks.launcher_of(tmp_path)
    assert found is not None
    assert (found.pid, found.pid_namespace) == (os.getpid(), "")
    assert found.start == procs.process_start(os.getpid()) and found.proc_mount == procs.proc_mount()
    assert not found.hidden()  # this very process sees itself as it is


def test_two_jobs_that_launch_at_once_both_take_the_drovers_launcher_lock(tmp_path, monkeypatch):
    """A drive's jobs launch from threads of one process. A flock belongs to an open file: two threads
    that each opened the launcher lock and locked it waited on each other for ever (a new user's
    `drive --jobs 2` hung at its second job's first launch, Ctrl-C with it). The sweep of old lock
    files is slowed here so that both threads are inside at once, as they were there."""
    import threading
    import time

    from drover.agents import locks

    real_sweep = locks._sweep

    def slow_sweep(folder):
        time.sleep(0.3)
        real_sweep(folder)

    monkeypatch.setattr(locks, "_sweep", slow_sweep)
    state_dir = tmp_path / ".drover"
    threads = [threading.Thread(target=locks.hold_launcher, args=(state_dir,), daemon=True) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert not any(thread.is_alive() for thread in threads), "a job waits for ever on its own drover's lock"
        assert [launcher.pid for launcher in locks.live_launchers(state_dir)] == [os.getpid()]
    finally:
        held = locks._holding.pop(state_dir, None)
        if held is not None:
            os.close(held)  # this test's process lives on: its lock goes with the test


@pytest.mark.parametrize("planted", ["folder", "fifo", "link"])
def test_a_drover_takes_its_launcher_lock_whatever_an_agent_put_in_its_place(tmp_path, planted):
    """An implementer that made a folder `<pid>.lock` for every pid in .drover/launchers/ had every
    later launch fail (`could not start python: Is a directory`) and a drive fail each item; a fifo
    failed the same way, and a link was written through (hostile review 18). No live drover's lock
    is anything but a regular file, and none but this one has its pid: what is there goes."""
    from drover.agents import locks

    state_dir = tmp_path / ".drover"
    folder = state_dir / locks.LAUNCHERS
    folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("not drover's\n")
    mine = folder / f"{os.getpid()}.lock"
    if planted == "folder":
        (mine / "deeper").mkdir(parents=True)
    elif planted == "fifo":
        os.mkfifo(mine)
    else:
        mine.symlink_to(victim)
    other = folder / "4194303.lock"  # what the agent made for the pids no drover has
    other.mkdir()
    try:
        locks.hold_launcher(state_dir)
        assert mine.is_file() and not mine.is_symlink()
        assert locks.lock_holder(mine) == os.getpid() and locks.launcher_pids(state_dir) == {os.getpid()}
    finally:
        held = locks._holding.pop(state_dir, None)
        if held is not None:
            os.close(held)
    assert victim.read_text() == "not drover's\n"
    assert not other.exists()  # swept: every later sweep would scan it again


def test_a_link_in_place_of_the_launchers_folder_is_not_swept_through(tmp_path):
    """The sweep removes every file in .drover/launchers/ that no drover holds: made a link to
    another folder, it would have removed that folder's files."""
    from drover.agents import locks

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine\n")
    state_dir = tmp_path / ".drover"
    state_dir.mkdir()
    (state_dir / locks.LAUNCHERS).symlink_to(elsewhere)
    try:
        locks.hold_launcher(state_dir)
    finally:
        held = locks._holding.pop(state_dir, None)
        if held is not None:
            os.close(held)
    assert (elsewhere / "notes.txt").read_text() == "mine\n" and sorted(elsewhere.iterdir()) == [elsewhere / "notes.txt"]
    assert (state_dir / locks.LAUNCHERS).is_dir() and not (state_dir / locks.LAUNCHERS).is_symlink()


def test_the_sweep_works_in_the_launchers_folder_it_opened_whatever_its_name_leads_to_since(tmp_path):
    """A leftover that swapped .drover/launchers for a link to another folder, in a loop, between
    drover's check of the name and its sweep had drover delete that folder's files (hostile review
    20): the sweep works through the descriptor of the folder it checked."""
    from drover.agents import locks

    state_dir = tmp_path / ".drover"
    (state_dir / locks.LAUNCHERS).mkdir(parents=True)
    (state_dir / locks.LAUNCHERS / "4194302.lock").write_text("an ended drover's\n")
    victim = tmp_path / "operator"
    victim.mkdir()
    (victim / "notes.txt").write_text("mine\n")
    folder = locks._launchers_folder(state_dir)
    try:
        (state_dir / locks.LAUNCHERS).rename(state_dir / "swapped")  # the swap, just after the check
        (state_dir / locks.LAUNCHERS).symlink_to(victim)
        locks._sweep(folder)
    finally:
        os.close(folder)
    assert (victim / "notes.txt").read_text() == "mine\n"
    assert list((state_dir / "swapped").iterdir()) == []  # swept where it looked


def test_a_hard_link_to_another_file_in_place_of_a_drovers_lock_neither_holds_it_nor_is_written(tmp_path):
    """A leftover hard-linked one of the operator's files as `<pid>.lock` for every pid and held a
    lock on it: the next launching drover waited in flock() as long as the leftover liked, then
    wrote its record into that file (hostile review 20)."""
    import fcntl
    import threading

    from drover.agents import locks

    state_dir = tmp_path / ".drover"
    folder = state_dir / locks.LAUNCHERS
    folder.mkdir(parents=True)
    victim = tmp_path / "operator.txt"
    victim.write_text("the operator's\n")
    os.link(victim, folder / f"{os.getpid()}.lock")
    os.link(victim, folder / "4194302.lock")
    held = os.open(victim, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # the leftover's lock
    taking = threading.Thread(target=locks.hold_launcher, args=(state_dir,), daemon=True)
    try:
        taking.start()
        taking.join(timeout=10)
        assert not taking.is_alive(), "drover waits on a lock the leftover holds on another file"
        mine = folder / f"{os.getpid()}.lock"
        assert os.stat(mine).st_nlink == 1 and not os.path.samefile(mine, victim)
    finally:
        os.close(held)
        fd = locks._holding.pop(state_dir, None)
        if fd is not None:
            os.close(fd)
    assert victim.read_text() == "the operator's\n" and os.stat(victim).st_nlink == 1


def test_a_launchers_lock_whose_text_names_another_pid_is_its_holders_as_the_kernel_says(tmp_path):
    """An implementer rewrote its drover's launcher lock to name pid 999999: every operator command
    then refused, as if that drover were out of sight (hostile review 20). The kernel names the
    holder; the place the drover recorded is still checked (dropped, a mount namespace of the
    agent's own with a /proc/locks of its own passed for the operator's: hostile review 21), and
    a record emptied or unreadable is a drover no process sees as it is."""
    from drover.agents import locks

    state_dir = tmp_path / ".drover"
    try:
        locks.hold_launcher(state_dir)
        lock = state_dir / locks.LAUNCHERS / f"{os.getpid()}.lock"
        assert locks.launcher_of(state_dir / locks.LAUNCHERS, lock.name).pid == os.getpid()
        _, *place = lock.read_text().split()
        for text, hidden in ((" ".join(["999999", *place]), False), (str(os.getpid()), True),
                             (f"{os.getpid()} - - -", True), ("not a record", True)):
            with open(lock, "r+") as rewritten:
                rewritten.truncate()
                rewritten.write(text + "\n")
            (found,) = locks.live_launchers(state_dir)
            assert found.pid == os.getpid() and found.hidden() is hidden, text
    finally:
        fd = locks._holding.pop(state_dir, None)
        if fd is not None:
            os.close(fd)


def test_read_only_folders_in_place_of_drovers_locks_are_removed_all_the_same(tmp_path):
    """Folders an agent made read-only (`chmod 555`, a file inside), named as the next drovers'
    locks, outlived the sweep, and the launch failed with `File exists` (hostile review 21). Run
    as a process without the capabilities that let root write anywhere (the operator is no root)."""
    import shutil
    import subprocess

    folder = tmp_path / ".drover" / "launchers"
    folder.mkdir(parents=True)
    planted = [folder / f"{pid}.lock" for pid in range(4194000, 4194010)]
    for path in planted:
        (path / "deeper").mkdir(parents=True)
        (path / "deeper" / "file").write_text("x")
        (path / "deeper").chmod(0o000)
        path.chmod(0o555)
    code = ("import os, sys\nfrom pathlib import Path\nfrom drover.agents import locks\n"
            "state = Path(sys.argv[1])\nlocks.hold_launcher(state)\n"
            )
    argv = [sys.executable, "-c", code, str(tmp_path / ".drover")]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop the capabilities that ignore file modes")
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        left = sorted(os.listdir(folder))
        assert [name for name in left if name.startswith("41940")] == [], left
    finally:
        for path in planted:
            if path.exists():
                path.chmod(0o700)
                if (path / "deeper").exists():
                    (path / "deeper").chmod(0o700)


def test_a_file_an_agent_made_and_locks_under_the_next_drovers_pid_does_not_hold_that_drover(tmp_path):
    """A leftover that made `<pid>.lock` as a file of its own (one name, so no hard link) for the
    pids to come, and held a lock on each, had the next launching drover wait in flock() for as
    long as the leftover lived. No live drover has this drover's pid: the name goes, a file is made."""
    import fcntl
    import threading

    from drover.agents import locks

    state_dir = tmp_path / ".drover"
    folder = state_dir / locks.LAUNCHERS
    folder.mkdir(parents=True)
    mine = folder / f"{os.getpid()}.lock"
    held = os.open(mine, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_EX)  # the leftover's lock, on a file of one name
    planted = os.fstat(held).st_ino
    taking = threading.Thread(target=locks.hold_launcher, args=(state_dir,), daemon=True)
    try:
        taking.start()
        taking.join(timeout=10)
        assert not taking.is_alive(), "drover waits on a lock an agent's leftover holds"
        assert os.stat(mine).st_ino != planted and locks.lock_holder(mine) == os.getpid()
    finally:
        os.close(held)
        fd = locks._holding.pop(state_dir, None)
        if fd is not None:
            os.close(fd)


def test_a_lock_gone_between_finding_it_held_and_reading_it_is_no_drover_out_of_sight(tmp_path, monkeypatch):
    """An agent that swapped its run folder for a link in a loop made the read of its drover's lock
    fail just after the lock was found held; taken for a record no drover wrote, that drover was
    one no process sees, and the operator's `drover stop` of the agent refused (found in the last
    read of hostile review 21's fix). A lock that cannot be read now is none, as drover_attached
    says of one it cannot open; text that is no record is still a drover out of sight."""
    from drover.agents import locks

    real, opened = locks._open_lock, []

    def gone_on_the_second_open(path):
        opened.append(path)
        if len(opened) == 2:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path)

    run_dir = tmp_path / "run"
    with locks.attached(run_dir):
        monkeypatch.setattr(locks, "_open_lock", gone_on_the_second_open)
        assert locks.launcher_of(run_dir) is None
        monkeypatch.setattr(locks, "_open_lock", real)
        (run_dir / locks.ATTACHED).write_text("not a record\n")
        assert locks.launcher_of(run_dir).hidden()


def test_the_demo_agent_implements_again_past_its_second_pass_without_a_traceback(repo):
    """Its second pass writes the fix; a third (after a failed check, a crash, a drive again) has
    nothing new to write and commits that it changed nothing, never a traceback."""
    from helpers import AGENT, configure, drover, git, new_item

    configure(repo)
    config = (repo / "drover.toml").read_text()
    config = config.replace('preset = "script" ', 'preset = "demo" ', 1)
    config = config.replace(f'command = "{sys.executable} {AGENT}"', 'command = ""', 1)
    assert 'preset = "demo" ' in config and f"{AGENT}" not in config
    (repo / "drover.toml").write_text(config)
    git(repo, "commit", "-qam", "the demo agent")
    item = new_item(repo, "Add a thing")
    for number in (1, 2, 3):
        done = drover(repo, "run", item)
        assert done.returncode == 0, (number, done.stdout + done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
    subjects = git(repo, "log", "--format=%s", f"main..drover/{item.lower()}").splitlines()
    assert subjects[0] == f"{item}: Add a thing (pass 3: nothing left to change)" and len(subjects) == 3, subjects
