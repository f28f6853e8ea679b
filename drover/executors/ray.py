"""The ray executor: each run's agent runs on a node of a Ray cluster; this machine keeps the ledger.

What travels: the prepared run, the base branch as a git bundle (put in Ray's object store
once per drive, shared by every run), the item branch as a bundle, a copy of the ledger and
the item files. What comes back: log, exit, timings, the outbox, a bundle of new commits.
Nothing a worker returns is taken on trust: the bundle may carry the item's branch and
nothing else, it must fast-forward that branch, its commits may not touch drover's state
(.drover/), and it moves `refs/heads/<item branch>` and no other ref; the outbox replays
through the same code as a local command. docs/executors.md has the model.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from drover.agents import environment
from drover import git
from drover.executors import outbox
from drover.executors.base import Launch
from drover.errors import DroverError, GitError, UsageError, printable
from drover.errors import shown_paths
from drover.git.files import folder_fd, open_regular, read_regular_text, remove_path, replace_at
from drover.ledger.ownfiles import state_paths
from drover.ledger.project import STATE_DIR
from drover.vocabulary import CONFIG_FILE
from drover.executors.base import Collected
from drover.executors.worker import result_problem, worker_field

if TYPE_CHECKING:
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project

INSTALL = "the ray executor needs Ray: pip install 'drover-cli[ray]'"
# No telemetry leaves the machine: set before Ray is imported anywhere in this process.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL) from None
    return ray


def _on_worker(payload: dict[str, Any], base_bundle: bytes) -> dict[str, Any]:
    """The task body: runs in a Ray worker process on some node."""
    import signal

    import ray

    from drover.executors.worker import work

    if threading.current_thread() is threading.main_thread():
        # The coordinator's Ctrl-C cancels this task by interrupting this thread (`cancel` below),
        # which does nothing where the node was started with SIGINT ignored, as a background job
        # of a script (`nohup ray start ... &`) is: the agent would run on, and the drive wait.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    result = work(payload, base_bundle)
    context = ray.get_runtime_context()
    result["node"] = f"{context.get_node_id()[:12]}@{ray.util.get_node_ip_address()}"
    return result


class RayHandle:
    def __init__(self, executor: "RayExecutor", project: "Project", ledger: "Ledger", launch: "Launch",
                 ref: Any, echo: bool):
        self.executor = executor
        self.project = project
        self.ledger = ledger
        self.launch = launch
        self.ref = ref
        self.echo = echo
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            # force=False raises KeyboardInterrupt in the task: the launch ends the agent's group.
            self.executor.ray.cancel(self.ref, force=False)

    def collect(self, cancel: threading.Event | None = None) -> Collected:
        ray = self.executor.ray
        try:
            while not ray.wait([self.ref], timeout=0.2)[0]:
                if cancel is not None and cancel.is_set():
                    self.cancel()
        except KeyboardInterrupt:
            self.cancel()
        try:
            result = ray.get(self.ref)
        except ray.exceptions.TaskCancelledError:
            return self._interrupted("cancelled on the coordinator")
        except ray.exceptions.RayError as exc:
            return self._interrupted(_first_line(str(exc)) or type(exc).__name__)
        return self._bring_home(result)

    def _interrupted(self, reason: str) -> Collected:
        _append(self.launch.log_path, f"\n[drover] interrupted: {reason}\n".encode())
        return Collected(None, "interrupted", 0.0, node="", reason=reason)

    def _bring_home(self, result: dict[str, Any]) -> Collected:
        if self.echo and not result_problem(result):
            for line in result["log"].decode("utf-8", errors="replace").splitlines():
                print(printable(f"[{self.launch.item_id} {self.launch.slot} {result['node']}] {line}"), flush=True)
        return bring_home(self.project, self.ledger, self.launch, result)


def bring_home(project: "Project", ledger: "Ledger", launch: "Launch", result: dict[str, Any]) -> Collected:
    """Take a worker's result: its log, its commits (validated), then its outbox, in that order.

    A result whose fields are not what a worker returns is taken not at all: the run ends failed,
    its reason saying why.
    """
    problem = result_problem(result)
    if problem:
        reason = f"the worker's result was refused: {problem}"
        _append(launch.log_path, f"[drover] {launch.item_id}: {reason}\n".encode())
        node = result.get("node") if isinstance(result, dict) else ""
        return Collected(None, "failed", 0.0, node="" if worker_field("node", node) else str(node), reason=reason,
                         notes=(f"{launch.item_id}: {reason}",))
    _append(launch.log_path, result["log"])
    notes = []
    refused = ""
    if result["bundle"]:
        problem = take_bundle(launch.workdir, launch.branch, result["bundle"])
        if problem:
            refused = f"the worker's commits were refused: {problem}"
            notes.append(f"{launch.item_id}: {refused}")
    kept = launch.run_dir / "outbox.jsonl"  # what the worker's commands asked for, as it came
    # an outbox past its caps (outbox.OUTBOX_BYTES and the rest) is kept and replayed not at all
    unread = result.get("outbox_refused") or outbox.over_cap(result["outbox"])
    if result["outbox"] and not unread:
        _keep(kept, result["outbox"].encode("utf-8"))
    root = project.root
    try:
        if unread:
            raise outbox.OverCap(unread)
        entries = outbox.read(result["outbox"])
        notes += outbox.replay(project, ledger, entries, run_id=launch.run_id,
                               head_of=lambda item: git.rev_parse(root, f"refs/heads/{launch.branch}")
                               if item == launch.item_id else "", source=project.relpath(kept))
    except outbox.OverCap as exc:
        # a run whose verdicts were not taken did not do what its exit says, as one whose commits were not
        said = f"the worker's outbox was refused: {exc}; nothing of it was replayed"
        refused = refused or said
        notes.append(f"{launch.item_id}: {said}")
    except DroverError as exc:
        notes.append(f"{launch.item_id}: the worker's outbox was refused: {exc}")
    for note in notes:
        _append(launch.log_path, f"[drover] {note}\n".encode())
    # a run whose commits did not come home did not do what its exit says: it failed, and says why
    outcome = "failed" if refused else result["outcome"]
    reason = refused or ("" if outcome == "exited" else outcome)
    return Collected(result["exit_code"], outcome, result["elapsed"], node=result.get("node", ""),
                     reason=reason, notes=tuple(notes), usage=result.get("usage"))


def take_bundle(workdir: Path, branch: str, data: bytes) -> str:
    """Move the local branch `branch` forward to a worker's commits (its files too where `workdir`
    has it checked out); "" when done, else why not, and then no ref has moved."""
    with tempfile.TemporaryDirectory(prefix="drover-bundle-") as tmp:
        path = Path(tmp) / "out.bundle"
        path.write_bytes(data)
        try:
            heads = git.bundle_heads(workdir, path)
        except GitError as exc:
            return str(exc)
        wanted = git.local_ref(branch)
        others = [ref for _, ref in heads if ref != wanted]
        if others or not heads:
            return f"it carries {', '.join(others) or 'no branch'}; only {wanted} is taken"
        if len(heads) > 1:
            # a fetch takes the header's last line for the branch, the checks below its first
            return f"it names {wanted} twice; a worker's bundle carries the branch once"
        new = heads[0][0]
        old = git.head_of(workdir, branch)
        if not old:
            return f"there is no branch {branch} here for it to move"
        try:
            git.fetch_bundle(workdir, path, wanted)  # its objects only: no ref moves yet
            state = state_paths(git.commits_paths(workdir, old, new))
            if state:
                return (f"its commits change drover's own state ({shown_paths(state)}); "
                        f"nothing under {STATE_DIR}/ is taken from an agent")
            git.advance_branch(workdir, branch, new, path)
        except GitError as exc:
            return str(exc)
    return ""


def _append(path: Path, data: bytes) -> None:
    """`data` at the end of the run's log, opened as every log is (open_regular: never through a
    link, never waiting on a fifo). An agent on a node of this machine can reach the run's folder:
    whatever it put in the log's place is removed first, never written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle = open_regular(path, "ab")
    except OSError:
        remove_path(path)
        handle = open_regular(path, "ab")
    with handle:
        handle.write(data)


def _keep(path: Path, data: bytes) -> None:
    """A new file at `path` in the run's folder holding `data`, in place of whatever an agent put
    there (files.replace_at: a link is replaced, never written through)."""
    folder = folder_fd(path.parent)
    try:
        replace_at(folder, path.name, data)
    finally:
        os.close(folder)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def base_bundle(root: Path, base: str) -> bytes:
    """The base branch as bundle bytes."""
    with tempfile.TemporaryDirectory(prefix="drover-bundle-") as tmp:
        path = Path(tmp) / "base.bundle"
        git.bundle_create(root, path, f"refs/heads/{base}")
        return path.read_bytes()


def make_payload(project: "Project", ledger: "Ledger", launch: "Launch", base_sha: str) -> dict[str, Any]:
    """A prepared run as plain data: the run, the item branch's own commits, a ledger copy, the files."""
    root = project.root
    with tempfile.TemporaryDirectory(prefix="drover-bundle-") as tmp:
        item = Path(tmp) / "item.bundle"
        has = git.bundle_create(root, item, f"refs/heads/{launch.branch}", exclude=base_sha)
        item_bytes = item.read_bytes() if has else b""
        snapshot = Path(tmp) / "ledger.db"
        ledger.snapshot(snapshot)
        ledger_bytes = snapshot.read_bytes()
    files = {}
    for path in sorted(project.items_dir.glob("*.md")) if project.items_dir.is_dir() else ():
        try:
            files[project.relpath(path)] = read_regular_text(path)  # never waits on a fifo
        except (OSError, UnicodeDecodeError):
            continue  # no item file (a folder, not text): it stays home, as the run's item is readable
    config = root / CONFIG_FILE
    if config.exists():
        files[CONFIG_FILE] = config.read_text(encoding="utf-8")
    return {
        "item_id": launch.item_id, "slot": launch.slot, "run_id": launch.run_id,
        "base": project.config.base, "branch": launch.branch, "item_bundle": item_bytes,
        "files": files, "ledger": ledger_bytes, "ledger_rel": project.relpath(project.ledger_path),
        "items_rel": project.config.items,
        "worktree_rel": project.relpath(launch.worktree) if launch.worktree else "",
        "prompt_rel": project.relpath(launch.prompt_path), "prompt_file": str(launch.prompt_path),
        "argv": list(launch.argv), "prompt": launch.prompt, "prompt_via": launch.prompt_via,
        "env": {key: value for key, value in launch.env_add.items() if key not in environment.MACHINE_VARIABLES},
        "timeout": launch.agent.timeout_seconds, "stream": launch.stream,
        "token_ceiling": launch.token_ceiling,
    }


class RayExecutor:
    name = "ray"

    def __init__(self, project: "Project"):
        self.ray = _require_ray()
        self.project = project
        self.settings = project.config.ray
        self._lock = threading.Lock()
        self._base: dict[str, Any] = {}  # base commit -> its bundle in the object store
        self._task: Any = None

    def where(self) -> str:
        return (f"the Ray cluster at {self.settings.address} ({self.settings.num_cpus} CPU per run; "
                "Ray picks the node)")

    def start(self) -> None:
        with self._lock:
            self._connect()

    def _connect(self) -> None:
        ray = self.ray
        if self._task is not None:
            return
        try:
            ray.init(address=self.settings.address, runtime_env=self.settings.runtime_env or None,
                     log_to_driver=False, logging_level="ERROR", configure_logging=False, ignore_reinit_error=True)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            raise UsageError(f"no Ray cluster at {self.settings.address}: {_first_line(str(exc))}") from None
        self._task = ray.remote(_on_worker)

    def _base_ref(self, root: Path, base: str) -> tuple[str, Any]:
        """The base branch's head, and its bundle in the object store: put there once per base
        commit, not per run."""
        sha = git.rev_parse(root, f"refs/heads/{base}")
        with self._lock:
            if sha not in self._base:
                self._base[sha] = self.ray.put(base_bundle(root, base))
            return sha, self._base[sha]

    def submit(self, project: "Project", ledger: "Ledger", launch: "Launch", *, echo: bool,
               on_start: Callable[[int], None], progress: Callable[[str], None] | None = None) -> RayHandle:
        self.start()
        root = project.root
        base_sha, base_ref = self._base_ref(root, project.config.base)
        payload = make_payload(project, ledger, launch, base_sha)
        # No retries: a run whose worker died is recorded interrupted, and the next pass resumes it.
        ref = self._task.options(num_cpus=self.settings.num_cpus, max_retries=0).remote(payload, base_ref)
        return RayHandle(self, project, ledger, launch, ref, echo)

    def close(self) -> None:
        if self.ray.is_initialized():
            self.ray.shutdown()
