"""drover.records.dataclass against the standard decorator: every class drover makes with it behaves as
dataclasses.dataclass would make it (signature, docstring, repr, equality, hash, frozen errors, replace)."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import marshal
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from drover import records
from dataclasses import dataclass

ROOT = Path(__file__).resolve().parent.parent


def _both(frozen: bool = False, slots: bool = False, doc: str | None = None) -> tuple[type, type]:
    """One class made by each decorator from the same body."""
    def body() -> type:
        class Sample:
            count: int
            name: str = "x"
            tags: tuple[str, ...] = ()
            extra: dict[str, Any] = dataclasses.field(default_factory=dict)
        Sample.__doc__ = doc
        return Sample
    return (dataclasses.dataclass(body(), frozen=frozen, slots=slots),
            dataclass(frozen=frozen, slots=slots)(body()))


def _outcome(action: Any) -> Any:
    try:
        return ("value", action())
    except Exception as error:  # noqa: BLE001 - the exception is the outcome compared
        return (type(error), str(error))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
@pytest.mark.parametrize("doc", [None, "A documented sample."])
def test_a_class_behaves_as_the_standard_decorator_makes_it(frozen, slots, doc):
    standard, fast = _both(frozen, slots, doc)
    assert str(inspect.signature(fast)) == str(inspect.signature(standard))
    assert fast.__doc__ == standard.__doc__
    assert fast.__match_args__ == standard.__match_args__
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(standard)]
    assert dataclasses.is_dataclass(fast)
    assert fast.__dataclass_params__.frozen is frozen
    one, other = fast(1, tags=("a",)), fast(1, tags=("a",))
    assert repr(one) == repr(standard(1, tags=("a",))).replace(standard.__qualname__, fast.__qualname__)
    assert one == other and one is not other and not (one != other)
    assert one != fast(2) and one != standard(1, tags=("a",)) and one != (1, "x", ("a",), {})
    assert one.extra is not other.extra  # the factory runs per instance
    assert _outcome(lambda: hash(fast(1))) == _outcome(lambda: hash(standard(1)))
    assert dataclasses.replace(one, name="y") == fast(1, "y", ("a",))
    assert _outcome(lambda: fast())[0] is TypeError
    for act in (lambda row: setattr(row, "count", 5), lambda row: delattr(row, "name"),
                lambda row: setattr(row, "novel", 1)):
        mine, theirs = _outcome(lambda: act(fast(1))), _outcome(lambda: act(standard(1)))
        if frozen and slots and mine[0] != "value":
            # 3.11's frozen methods name the class from before slots were added, so a new attribute
            # fails in super() with a TypeError; here it fails as frozen. Both refuse.
            assert theirs[0] != "value"
        else:
            assert mine == theirs
    for name in ("__getstate__", "__setstate__"):  # how a frozen slotted row pickles
        assert fast.__dict__.get(name) is standard.__dict__.get(name)


def test_repr_of_a_row_that_holds_itself_stops_as_the_standard_one_does():
    standard, fast = _both()
    mine, theirs = fast(1), standard(1)
    mine.extra["me"], theirs.extra["me"] = mine, theirs
    assert repr(mine) == repr(theirs)


def test_a_frozen_slotted_ledger_row_pickles():
    from drover.ledger.rows import Round
    row = Round("D-1", 2, "digest", headline="Commas split rows")
    assert pickle.loads(pickle.dumps(row)) == row


@pytest.mark.skipif(records.ONE_COMPILE, reason="from Python 3.13 every class goes to the standard decorator")
def test_an_option_it_does_not_copy_is_refused_not_half_made():
    with pytest.raises(TypeError):
        @dataclass(frozen=True)
        class Odd:
            hidden: int = dataclasses.field(default=0, repr=False)


def _drover_records() -> list[type]:
    """Every dataclass in drover whose methods records.py made."""
    found = {}
    for path in sorted((ROOT / "drover").rglob("*.py")):
        if "from dataclasses import dataclass" not in path.read_text(encoding="utf-8") and \
                "from ..records import dataclass" not in path.read_text(encoding="utf-8"):
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and \
                    dataclasses.is_dataclass(value):
                found[value.__qualname__ + value.__module__] = value
    return list(found.values())


def test_every_drover_record_matches_the_standard_decorator():
    kinds = _drover_records()
    assert len(kinds) > 30
    for kind in kinds:
        params = kind.__dataclass_params__
        standard = dataclasses.make_dataclass(
            kind.__name__, [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
                            for f in dataclasses.fields(kind)],
            frozen=params.frozen, slots="__slots__" in kind.__dict__)
        assert str(inspect.signature(kind)) == str(inspect.signature(standard)), kind
        required = [f for f in dataclasses.fields(kind)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        values = {f.name: f"v-{f.name}" for f in required}
        assert repr(kind(**values)) == repr(standard(**values)), kind
        assert kind(**values) == kind(**values), kind
        assert _outcome(lambda: hash(kind(**values))) == _outcome(lambda: hash(standard(**values))), kind


# --- the field work of a plain class, against the standard decorator's ------------------------

class _Base:
    inherited: int = 7  # a plain base's attribute is a field's default, as dataclasses reads it


def _field_facts(kind: type) -> dict[str, Any]:
    """What dataclasses keeps of a class: each field's every attribute, the params, the defaults."""
    facts = {name: (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare,
                    dict(f.metadata), f.kw_only, f._field_type)
             for name, f in kind.__dataclass_fields__.items()}
    return {"fields": facts, "params": repr(kind.__dataclass_params__), "match": kind.__match_args__,
            "defaults": {name: repr(kind.__dict__.get(name, "absent")) for name in facts},  # a slot by its repr
            "slots": kind.__dict__.get("__slots__"), "abstract": getattr(kind, "__abstractmethods__", None)}


def _samples() -> list[Any]:
    """Class bodies: plain, with factories, metadata, a plain base, a ClassVar, and the refused ones."""
    def plain() -> type:
        class Plain:
            count: int
            name: str = "x"
            extra: dict[str, Any] = dataclasses.field(default_factory=dict)
            noted: int = dataclasses.field(default=3, metadata={"table": "run"})
        return Plain

    def based() -> type:
        class Based(_Base):
            inherited: int
            own: str = "y"
        return Based

    def with_classvar() -> type:
        class WithClassVar:
            count: int
            limit: "typing.ClassVar[int]" = 3  # noqa: F821 - a string annotation, never evaluated
        return WithClassVar

    def mutable() -> type:
        class Mutable:
            tags: list[str] = []  # noqa: RUF012 - the mistake the decorator refuses
        return Mutable

    def unannotated() -> type:
        class Unannotated:
            count: int
            loose = dataclasses.field(default=1)
        return Unannotated

    return [plain, based, with_classvar, mutable, unannotated]


@pytest.mark.parametrize("slots", [False, True])
@pytest.mark.parametrize("body", _samples(), ids=lambda body: body.__name__)
def test_the_field_work_is_the_standard_decorators(body, slots):
    def made(through: Any) -> Any:
        return _outcome(lambda: _field_facts(through(body())))

    standard = made(lambda cls: dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots))
    fast = made(lambda cls: records._fields_made(cls, slots) or
                dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots))
    assert fast == standard
    if body.__name__ in ("plain", "based") and records._OWN_FIELDS:
        assert records._fields_made(body(), slots) is not None  # the fast path took these


# --- compiled __init__ code kept between processes ----------------------------------------------

_IMPORT_RECORDS = (
    "import drover.prompts.fields, drover.ledger.rows, drover.config, drover.records as r; "
    "print(sum(source not in (r._codes or {}) for source in r._met), len(r._met))"
)


def _compiles(env: dict[str, str]) -> tuple[int, int]:
    """(sources compiled, sources met) by a fresh interpreter importing record-heavy modules."""
    done = subprocess.run([sys.executable, "-c", _IMPORT_RECORDS], env=env, capture_output=True, text=True,
                          check=True)
    compiled, met = done.stdout.split()
    return int(compiled), int(met)


@pytest.mark.skipif(records.ONE_COMPILE, reason="from Python 3.13 every class goes to the standard decorator")
def test_kept_init_code_is_what_compiling_its_source_gives(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("DROVER_NO_CACHE", None)
    compiled, met = _compiles(env)
    assert compiled == met > 20  # nothing kept yet: every source compiled, then written
    (path,) = (tmp_path / "drover").glob("records-*.marshal")
    python, codes = marshal.loads(path.read_bytes())
    assert python == sys.version and len(codes) == met
    for source, code in codes.items():
        assert code == compile(source, "<string>", "exec"), source
    written = path.stat()
    assert _compiles(env) == (0, met)  # the next process compiles nothing
    after = path.stat()  # and, having met nothing new, writes nothing
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


@pytest.mark.skipif(records.ONE_COMPILE, reason="from Python 3.13 every class goes to the standard decorator")
@pytest.mark.parametrize("damage", [b"", b"not marshal", marshal.dumps(("3.0.0", {})),
                                    marshal.dumps((sys.version, {"def f(): pass": "not code"})),
                                    marshal.dumps([1, 2, 3])])
def test_a_damaged_code_cache_is_compiled_again_and_replaced(tmp_path, damage):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("DROVER_NO_CACHE", None)
    _, met = _compiles(env)
    (path,) = (tmp_path / "drover").glob("records-*.marshal")
    path.write_bytes(damage)
    assert _compiles(env) == (met, met)
    assert _compiles(env) == (0, met)


@pytest.mark.skipif(records.ONE_COMPILE, reason="from Python 3.13 every class goes to the standard decorator")
def test_no_code_cache_when_caches_are_off(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "DROVER_NO_CACHE": "1"}
    assert _compiles(env)[0] > 20
    assert not (tmp_path / "drover").exists()
