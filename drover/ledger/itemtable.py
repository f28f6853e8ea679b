"""The ledger's `items` and `ids_met` tables: the ids allocated and met (never reused), and which
items are done or parked."""
from __future__ import annotations

from typing import Any, Callable

from drover.errors import Refused, one_line
from drover.ledger.connection import now
from drover.ledger.journal import Journal
from drover.vocabulary import MAX_ITEM_NUMBER

# next_item_id's test of an id (:pattern is "<prefix>-[1-9]*", :start where the number starts):
# longer than `above`, or as long and greater as text, then an id. Named parameters: numbered
# ones given as a sequence are deprecated from Python 3.12.
_ABOVE = ("(length(id) > :length OR (length(id) = :length AND id > :above)) AND id GLOB :pattern "
          "AND substr(id, :start) NOT GLOB '*[^0-9]*'")


class ItemTable(Journal):
    """Item ids and the done and parked flags."""

    def allocate_item(self, prefix: str, floor: int, taken: Callable[[int], bool] | None = None, *,
                      peeked: str = "") -> str:
        """The next item id: above every id ever allocated and `floor`, skipping numbers `taken` says exist.

        `peeked`: the id next_item_id gave this caller under the writers' lock it still holds, so
        nobody can have taken it since (the items row's key refuses it if somebody did).
        """
        with self.write():
            item_id = peeked or self.next_item_id(prefix, floor, taken)
            self.db.table("items").insert({"id": item_id, "number": int(item_id.rsplit("-", 1)[1]), "created_at": now()})
            return item_id

    def highest_number(self) -> int:
        """The highest number of an id allocate_item gave (0 before any)."""
        (highest,) = self.conn.execute("SELECT coalesce(max(number), 0) FROM items").fetchone()
        return int(highest)

    def highest_met(self, prefix: str) -> int:
        """The highest number of a `<prefix>-<number>` item file the cache or `new` has met (0
        before any), kept when the file and its cache row are gone."""
        return self.met(prefix)[0]

    def met(self, prefix: str) -> tuple[int, str | None]:
        """(highest_met, the items folder's state when none of its names was numbered higher:
        folder_state's text, or None when not known)."""
        row = self.conn.execute("SELECT highest, folder FROM ids_met WHERE prefix = ?", (prefix,)).fetchone()
        return (0, None) if row is None else (int(row["highest"]), row["folder"])

    def raise_met(self, prefix: str, highest: int, folder: str | None = None) -> None:
        """Raise the prefix's highest met to `highest` (it is never lowered); with `folder`, also
        record that no name in the items folder, in that state, is numbered above it."""
        with self.write():  # read and written in one transaction: nobody raises it meanwhile
            known, _ = self.met(prefix)
            row: dict[str, Any] = {"prefix": prefix, "highest": max(known, min(highest, MAX_ITEM_NUMBER))}
            if folder is not None:
                row["folder"] = folder
            self.db.table("ids_met").upsert(row, pk="prefix")

    def next_item_id(self, prefix: str, floor: int, taken: Callable[[int], bool] | None = None) -> str:
        """The id allocate_item would give now (the same one, while the caller holds the lock)."""
        highest = max(self.highest_number(), self.highest_met(prefix), floor)
        # ids the ledger met without allocating them (hand-written files that were parked or
        # run; those listed are in ids_met) stay taken even after their files are gone: the
        # highest of them matters only above `highest`, so SQL keeps only ids longer than it,
        # or as long and greater as text (two cheap tests per row), before the id tests and
        # the number
        above = f"{prefix}-{highest}"
        (met,) = self.conn.execute(
            f"SELECT max(CAST(substr(id, :start) AS INTEGER)) FROM items WHERE number IS NULL AND {_ABOVE}",
            {"length": len(above), "above": above, "pattern": prefix + "-[1-9]*", "start": len(prefix) + 2},
        ).fetchone()
        number = max(highest, met or 0) + 1
        while taken is not None and taken(number):
            number += 1
        if number > MAX_ITEM_NUMBER:
            raise Refused(f"no id is left for a new item: an id numbered {prefix}-{MAX_ITEM_NUMBER} or higher "
                          "was met (an item file's name, or the ledger's), and that is the highest id drover gives")
        return f"{prefix}-{number}"

    def item_row(self, item_id: str) -> dict[str, Any]:
        rows = self._rows("SELECT * FROM items WHERE id = ?", (item_id,))
        return rows[0] if rows else {"id": item_id, "done": 0, "parked": 0}

    def has_item(self, item_id: str) -> bool:
        """Whether the items table has a row for `item_id` (one lookup, not item_rows' every row)."""
        return self.conn.execute("SELECT 1 FROM items WHERE id = ?", (item_id,)).fetchone() is not None

    def item_rows(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self._rows("SELECT * FROM items")}

    def flags(self) -> tuple[set[str], dict[str, str]]:
        """The ids of items done, and of items parked and not done with their reason, as
        state.state_of reads them, without a dict per row."""
        done: set[str] = set()
        parked: dict[str, str] = {}
        cursor = self.conn.cursor()
        cursor.row_factory = None
        for item, is_done, is_parked, reason in cursor.execute(
                "SELECT id, done, parked, parked_reason FROM items WHERE done OR parked"):
            if is_done:
                done.add(item)
            elif is_parked:
                parked[item] = reason or ""
        return done, parked

    def _ensure_item(self, item_id: str) -> None:
        """An items row for `item_id` (neither done nor parked when it is new), inside the caller's transaction."""
        self.db.table("items").insert({"id": item_id, "done": 0, "parked": 0}, ignore=True)

    def _set_flags(self, item_id: str, flags: dict[str, Any]) -> None:
        """Set the item's done or parked columns, making its row when it has none."""
        with self.write():
            self.db.table("items").upsert({"id": item_id, **flags}, pk="id")

    def mark_done(self, item_id: str) -> None:
        self._set_flags(item_id, {"done": 1, "done_at": now()})

    def park(self, item_id: str, reason: str) -> None:
        """Park the item for `reason`, kept as one line: it is shown inside other lines (the drive's progress
        and summary, `list`, `show`), where an agent's newline wrote lines of drover's own (hostile review 24)."""
        self._set_flags(item_id, {"parked": 1, "parked_reason": one_line(reason), "parked_at": now()})

    def unpark(self, item_id: str) -> None:
        self._set_flags(item_id, {"parked": 0, "parked_reason": None, "parked_at": None})
