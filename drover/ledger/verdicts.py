"""The ledger's verdicts on items: `rounds` (a review's send-backs), `audits` (claims and approvals)
and `dispositions` (a reviewer's judgment of each issue an item closes)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from drover.ledger.activity import opens_gate
from drover.ledger.connection import now
from drover.ledger.runtable import RunTable

if TYPE_CHECKING:
    from drover.ledger.rows import Audit, ItemRows, Round, Run


class Verdicts(RunTable):
    """Rounds, audits and dispositions; whether an audit opens the gate is decided as it is recorded."""

    # rounds --------------------------------------------------------------------------------

    def rounds(self, item_id: str) -> list[Round]:
        from drover.ledger.rows import ROUND_COLUMNS, Round

        return [Round(*row) for row in
                self.conn.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE item = ? ORDER BY number", (item_id,))]

    def newest_rounds(self, *, uncleared: bool, items: Sequence[str] | None = None) -> dict[str, int]:
        """Per item whose rounds are all cleared (uncleared=False) or not (True), its newest round's
        number; items: only these (check asks about few, of 50,000)."""
        where = ""
        if items is not None:
            where = f" WHERE item IN ({', '.join('?' for _ in items)})"
        cursor = self.conn.cursor()
        cursor.row_factory = None
        sql = (f"SELECT item, max(number) FROM rounds{where} GROUP BY item "
               f"HAVING sum(cleared_at IS NULL) {'!=' if uncleared else '='} 0")
        return dict(cursor.execute(sql, list(items or ())))

    def add_round(self, item_id: str, digest: str, headline: str, path: str, by: str) -> int:
        """Record the next round; the number is taken inside the transaction."""
        with self.write():
            (highest,) = self.conn.execute(
                "SELECT coalesce(max(number), 0) FROM rounds WHERE item = ?", (item_id,)
            ).fetchone()
            number: int = highest + 1
            self._ensure_item(item_id)
            self.db.table("rounds").insert({"item": item_id, "number": number, "digest": digest, "headline": headline,
                                            "path": path, "by": by, "at": now()})
            return number

    def clear_round(self, item_id: str, by: str) -> int | None:
        """Mark every uncleared round cleared; returns the newest one's number.

        Earlier uncleared rounds were replaced by the newest one's findings, so discharging the
        newest discharges them too: once the Changes section is cleared no round is outstanding.
        """
        with self.write():
            numbers = [row["number"] for row in self.conn.execute(
                "SELECT number FROM rounds WHERE item = ? AND cleared_at IS NULL ORDER BY number", (item_id,))]
            if not numbers:
                return None
            cleared = {"cleared_at": now(), "cleared_by": by}
            for number in numbers:
                self.db.table("rounds").update((item_id, number), cleared)
            newest: int = numbers[-1]
            return newest

    # audits ----------------------------------------------------------------------------------

    def add_audit(self, item_id: str, level: str, by: str, note: str, head: str = "", *, run: str = "",
                  require_independent: bool = False) -> Audit:
        """Record an audit given in run `run` ("" the operator outside any run); whether it opens the
        gate is decided here, against the item's authors as they stand (activity.opens_gate)."""
        from drover.ledger.rows import AUDIT_COLUMNS, Audit

        with self.write():
            self._ensure_item(item_id)
            authors = self.authors(item_id)
            acting = self.run(run) if run else None
            opens = opens_gate(item_id, level, run, acting, by, authors, require_independent)
            rowid = self.db.table("audits").insert(
                {"item": item_id, "level": level, "by": by, "note": note, "at": now(),
                 "authors": json.dumps(authors), "head": head, "run": run, "opens": int(opens)}
            ).last_rowid
            return Audit.from_row(self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE id = ?",
                                                    (rowid,)).fetchone())

    def audits(self, item_id: str) -> list[Audit]:
        from drover.ledger.rows import AUDIT_COLUMNS, Audit

        return [Audit.from_row(row) for row in
                self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE item = ? ORDER BY at, id", (item_id,))]

    def rows_of(self, item_ids: Sequence[str], *, every_item: bool = False) -> ItemRows:
        """Several items' runs, audits and `items` rows, one read of each table (a prompt's item and its
        deps); every_item: the `items` rows of every item (a draft's siblings need whether each is done)."""
        from drover.ledger.rows import AUDIT_COLUMNS, Audit, ItemRows

        ids = list(dict.fromkeys(item_ids))
        if not ids:
            return ItemRows()
        marks = ", ".join("?" for _ in ids)
        runs: dict[str, list[Run]] = {}
        for run in self._runs(f"WHERE item IN ({marks}) ORDER BY started, rowid", ids):
            runs.setdefault(run.item, []).append(run)
        audits: dict[str, list[Audit]] = {}
        for row in self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE item IN ({marks}) ORDER BY at, id", ids):
            audit = Audit.from_row(row)
            audits.setdefault(audit.item, []).append(audit)
        which = ("SELECT * FROM items", []) if every_item else (f"SELECT * FROM items WHERE id IN ({marks})", ids)
        items = {row["id"]: row for row in self._rows(*which)}
        return ItemRows({item: tuple(found) for item, found in runs.items()},
                        {item: tuple(found) for item, found in audits.items()}, items)

    def authors(self, item_id: str) -> list[str]:
        """The agent identities of implementing runs plus the `by` of claimed audits (ItemRows.authors)."""
        return self.rows_of([item_id]).authors(item_id)

    # dispositions ------------------------------------------------------------------------------

    def add_disposition(self, item_id: str, issue: int, disposition: str, by: str, note: str) -> None:
        with self.write():
            self._ensure_item(item_id)
            self.db.table("dispositions").insert({"item": item_id, "issue": issue, "disposition": disposition,
                                                  "by": by, "note": note, "at": now(), "applied": ""})

    def newest_dispositions(self, item_id: str) -> dict[int, dict[str, Any]]:
        """The judgment in force per issue: the newest disposition recorded for it."""
        return {row["issue"]: row for row in self.dispositions(item_id)}

    def dispositions(self, item_id: str) -> list[dict[str, Any]]:
        """Every disposition recorded, oldest first (the newest per issue is the judgment)."""
        return self._rows("SELECT * FROM dispositions WHERE item = ? ORDER BY at, id", (item_id,))

    def set_applied(self, disposition_id: int, applied: str) -> None:
        with self.write():
            self.db.table("dispositions").update(disposition_id, {"applied": applied})
