"""The `worktree_pool` table: each pooled worktree (docs/worktrees.md), who holds it, its state and
when `[run] setup` last ran in it with which inputs. Holds are taken under the writers' lock, so
no two holders (an item, or one item's check) ever get one worktree."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from drover.ledger.connection import now
from drover.ledger.journal import Journal

# A row's state: `free` waits for the next holder; `held` is a holder's; `cleaning` is being made
# ready (cleaned and switched, or added) by the drover process `pid`: a row left `cleaning` by a
# process that is gone was interrupted mid-clean and is never handed out as it is.
FREE, HELD, CLEANING = "free", "held", "cleaning"
CHECK_SUFFIX = ":check"  # a check's holder is "<item>:check" (verify.py), an item's is its id


class PoolRow(NamedTuple):
    path: str  # relative to the project root
    holder: str  # "" when free
    state: str
    pid: int | None
    pid_start: str
    created: str
    used: str
    setup_at: str
    setup_digest: str


def _pool(db: Any) -> None:
    """Migration 0019_worktree_pool (listed in migrations.MIGRATIONS)."""
    db["worktree_pool"].create(
        {"path": str, "holder": str, "state": str, "pid": int, "pid_start": str, "created": str, "used": str,
         "setup_at": str, "setup_digest": str},
        pk="path",
        not_null={"path", "state", "created"},
    )


def _row(row: Any) -> PoolRow:
    return PoolRow(row["path"], row["holder"] or "", row["state"], row["pid"], row["pid_start"] or "",
                   row["created"], row["used"] or "", row["setup_at"] or "", row["setup_digest"] or "")


class PoolTable(Journal):
    """The pooled worktrees' rows; every change of holder or state under the writers' lock."""

    def pool_rows(self) -> list[PoolRow]:
        return [_row(row) for row in self.conn.execute("SELECT * FROM worktree_pool ORDER BY created, path")]

    def pool_row(self, path: str) -> PoolRow | None:
        found = self.conn.execute("SELECT * FROM worktree_pool WHERE path = ?", (path,)).fetchone()
        return _row(found) if found else None

    def held_worktree(self, holder: str) -> PoolRow | None:
        """The pooled worktree `holder` holds (held, or being made ready for it), if any."""
        found = self.conn.execute("SELECT * FROM worktree_pool WHERE holder = ? ORDER BY created LIMIT 1",
                                  (holder,)).fetchone()
        return _row(found) if found else None

    def claim_pooled(self, holder: str, pid: int, pid_start: str, reusable: Callable[[PoolRow], bool],
                     fresh_path: Callable[[set[str]], str], spare: Callable[[PoolRow], bool] | None = None,
                     limit: int = 0) -> tuple[PoolRow, bool]:
        """(the row `holder` now has, marked `cleaning` by `pid`, whether it is new): a free row, or
        one `reusable` accepts (a check's whose drover is gone), or when the pool has `limit` rows
        already, a held one `spare` gives up (a parked item's, pool.py), else a new row at
        `fresh_path` (given the paths in use), which the caller then adds as a worktree."""
        with self.write():
            rows = self.pool_rows()
            taken = next((row for row in rows if row.state == FREE
                          or (row.holder.endswith(CHECK_SUFFIX) and reusable(row))), None)
            if taken is None and spare is not None and len(rows) >= limit:
                taken = next((row for row in rows if row.state == HELD and spare(row)), None)
            if taken is not None:
                self._set_pooled(taken.path, holder=holder, state=CLEANING, pid=pid, pid_start=pid_start,
                                 used=now())
                return taken._replace(holder=holder, state=CLEANING, pid=pid, pid_start=pid_start), False
            path = fresh_path({row.path for row in rows})
            stamp = now()
            self.db.table("worktree_pool").insert({"path": path, "holder": holder, "state": CLEANING, "pid": pid,
                                                   "pid_start": pid_start, "created": stamp, "used": stamp})
            return PoolRow(path, holder, CLEANING, pid, pid_start, stamp, stamp, "", ""), True

    def claim_stale(self, path: str, pid: int, pid_start: str, stale: Callable[[PoolRow], bool]) -> bool:
        """Take the row at `path` for this process to discard, if `stale` still says so under the lock."""
        with self.write():
            row = self.pool_row(path)
            if row is None or not stale(row):
                return False
            self._set_pooled(path, state=CLEANING, pid=pid, pid_start=pid_start)
            return True

    def set_pooled(self, path: str, **values: Any) -> None:
        with self.write():
            self._set_pooled(path, **values)

    def _set_pooled(self, path: str, **values: Any) -> None:
        self.db.table("worktree_pool").update(path, values)

    def release_pooled(self, path: str, limit: int) -> bool:
        """The holder is done with `path`: True when it stays in the pool (free), False when the pool
        already keeps `limit` others and the caller removes it (its row is gone)."""
        with self.write():
            others = self.conn.execute("SELECT count(*) FROM worktree_pool WHERE path != ?", (path,)).fetchone()[0]
            if others >= limit:
                self.db.table("worktree_pool").delete_where("path = ?", [path])
                return False
            self._set_pooled(path, holder=None, state=FREE, pid=None, pid_start=None)
            return True

    def drop_pooled(self, path: str) -> None:
        with self.write():
            self.db.table("worktree_pool").delete_where("path = ?", [path])
