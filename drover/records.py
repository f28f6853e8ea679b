"""`dataclass`, as the standard one, with its generated methods compiled in one go per class.

Python 3.11's dataclasses compiles each generated method on its own (`__init__`, `__repr__`,
`__eq__`, `__hash__`, and a frozen class's `__setattr__` and `__delattr__`): six compiles per
class, about 40 classes in a `prompt` process, a third of its import time. Here the standard
decorator does the field work with its generators off, then one compile makes the same methods
(from 3.13 the standard decorator does so itself, and this module hands it every class). What
it makes is what the standard one makes: the same signature, repr text, equality, hash and
frozen errors; `fields`, `replace` and `is_dataclass` work unchanged. An option or field feature this module does not copy goes to the standard one.
Modules import it as `dataclass` at run time and the standard one for the type checker.

Compiling the `__init__`s was still about 13 ms of a `prompt` (TemplateData's alone about 1 ms):
their code objects are kept between processes in `$XDG_CACHE_HOME/drover/records-*.marshal`,
keyed on their whole source text, so a process compiles only a source it has not met
(docs/decisions.md). A cache that cannot be read or written only means compiling.
"""
from __future__ import annotations

import abc
import dataclasses
import inspect
import marshal
import operator
import os
import reprlib
import sys
from types import CodeType, MemberDescriptorType
from typing import Any, Callable, TypeVar, dataclass_transform, overload

_T = TypeVar("_T", bound=type)

# From 3.13 the standard decorator compiles a class's methods in one go itself.
ONE_COMPILE = sys.version_info >= (3, 13)

_PLAIN_OPTIONS = {"init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": False,
                  "match_args": True, "kw_only": False, "weakref_slot": False}


class _Factory:
    """A default_factory field's default in __init__, shown as dataclasses shows its own."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]
_PARAMS = dataclasses._DataclassParams  # type: ignore[attr-defined]
# _fields_made copies 3.11's field work (3.12's params take ten arguments; 3.13 goes standard anyway)
_OWN_FIELDS = sys.version_info[:2] == (3, 11)


@overload
def dataclass(cls: _T, /) -> _T: ...
@overload
def dataclass(cls: None = None, /, *, frozen: bool = False, slots: bool = False) -> Callable[[_T], _T]: ...
@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type | None = None, /, *, frozen: bool = False, slots: bool = False,
              **options: Any) -> Any:
    """Like `dataclasses.dataclass(frozen=..., slots=...)`; other options go to the standard one."""
    def wrap(cls: type) -> type:
        if ONE_COMPILE or any(_PLAIN_OPTIONS.get(name, not value) != value for name, value in options.items()) or \
                "__post_init__" in cls.__dict__:
            return dataclasses.dataclass(cls, frozen=frozen, slots=slots, **options)
        undocumented = not cls.__doc__
        if undocumented:  # its text comes from __init__'s signature, once that is made below
            cls.__doc__ = "-"
        made: type = _fields_made(cls, slots) or dataclasses.dataclass(cls, init=False, repr=False, eq=False,
                                                                        slots=slots)
        fields = dataclasses.fields(made)
        if not all(_plain(field) for field in fields) or \
                any(name in made.__dict__ for name in ("__repr__", "__eq__", "__hash__")):
            raise TypeError(f"{cls.__qualname__}: a field option or method drover.records does not copy; "
                            "use dataclasses.dataclass")
        _add_methods(made, fields, frozen)
        if undocumented:
            made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
        params = made.__dataclass_params__  # type: ignore[attr-defined]
        params.init = params.repr = params.eq = True  # the methods made below
        params.frozen = frozen
        if slots and frozen:  # pickling a frozen slotted class, as dataclasses
            setattr(made, "__getstate__", dataclasses._dataclass_getstate)  # type: ignore[attr-defined]
            setattr(made, "__setstate__", dataclasses._dataclass_setstate)  # type: ignore[attr-defined]
        return made
    return wrap if cls is None else wrap(cls)


def _fields_made(cls: type, slots: bool) -> type | None:
    """What `dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)` makes of a plain
    class (no dataclass base, no ClassVar, InitVar or KW_ONLY annotation), without its per-field
    checks of each annotation's text (a sixth of a prompt's import time); None for any other class."""
    annotations = cls.__dict__.get("__annotations__", {})
    if not _OWN_FIELDS or any(getattr(base, "__dataclass_fields__", None) is not None for base in cls.__mro__[1:]) or \
            any(not isinstance(kind, str) or "Var" in kind or "KW_ONLY" in kind for kind in annotations.values()):
        return None
    made: dict[str, dataclasses.Field[Any]] = {}
    for name, kind in annotations.items():  # as dataclasses._get_field makes each field
        default = getattr(cls, name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            field = default
        else:
            if isinstance(default, MemberDescriptorType):
                default = dataclasses.MISSING  # a __slots__ entry: no default
            field = dataclasses.field(default=default)  # type: ignore[arg-type]
        field.name = name
        field.type = kind
        field._field_type = _FIELD  # type: ignore[attr-defined]
        if field.kw_only is dataclasses.MISSING:
            field.kw_only = False
        if field.default.__class__.__hash__ is None:
            return None  # a mutable default: the standard decorator says so
        made[name] = field
    for name, field in made.items():
        if isinstance(getattr(cls, name, None), dataclasses.Field):
            if field.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, field.default)
    if any(isinstance(value, dataclasses.Field) and name not in annotations for name, value in cls.__dict__.items()):
        return None  # a field without an annotation: the standard decorator says so
    cls.__dataclass_params__ = _PARAMS(False, False, False, False, False, False)  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = made  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        setattr(cls, "__match_args__", tuple(made))
    abc.update_abstractmethods(cls)
    return dataclasses._add_slots(cls, False, False) if slots else cls  # type: ignore[attr-defined]


def _plain(field: dataclasses.Field[Any]) -> bool:
    return (field.init and field.repr and field.compare and field.hash is None and not field.kw_only
            and field._field_type is dataclasses._FIELD)  # type: ignore[attr-defined]


def _add_methods(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> None:
    names = [field.name for field in fields]
    scope: dict[str, Any] = {"_object": object, "_FACTORY": _FACTORY}
    params, body = ["self"], []
    for field in fields:
        name = field.name
        if field.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{name}"] = field.default_factory
            params.append(f"{name}=_FACTORY")
            value = f"_factory_{name}() if {name} is _FACTORY else {name}"
        else:
            if field.default is not dataclasses.MISSING:
                scope[f"_default_{name}"] = field.default
                params.append(f"{name}=_default_{name}")
            else:
                params.append(name)
            value = name
        body.append(f"  _object.__setattr__(self, {name!r}, {value})" if frozen else
                    f"  self.{name} = {value}")
    exec(compiled("\n".join([f"def __init__({', '.join(params)}):", *(body or ["  pass"])])), scope)  # noqa: S102
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {field.name: field.type for field in fields} | {"return": None}
    methods = {"__init__": init, "__repr__": _repr(cls, tuple(names)), "__eq__": _eq(tuple(names))}
    if frozen:
        methods |= _frozen(cls, tuple(names))
    for name, method in methods.items():
        setattr(cls, name, method)
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  # eq without frozen: unhashable, as dataclasses


# The other methods are closures over the field names: made without compiling anything.

def _values(names: tuple[str, ...]) -> Any:
    """The fields' values as one tuple, as the generated methods of dataclasses compare and hash."""
    if len(names) == 1:
        return lambda row: (getattr(row, names[0]),)
    return operator.attrgetter(*names) if names else (lambda _: ())


def _repr(cls: type, names: tuple[str, ...]) -> Any:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:  # noqa: N807 - the method it is
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"
    __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
    return __repr__


def _eq(names: tuple[str, ...]) -> Any:
    values = _values(names)

    def __eq__(self: Any, other: Any) -> Any:  # noqa: N807 - the method it is
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented
    return __eq__


def _frozen(cls: type, names: tuple[str, ...]) -> dict[str, Any]:
    values = _values(names)
    protected = frozenset(names)

    def __hash__(self: Any) -> int:  # noqa: N807 - the method it is
        return hash(values(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:  # noqa: N807 - the method it is
        if type(self) is cls or name in protected:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:  # noqa: N807 - the method it is
        if type(self) is cls or name in protected:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]
    return {"__hash__": __hash__, "__setattr__": __setattr__, "__delattr__": __delattr__}


# --- compiled sources kept between processes -------------------------------------------------

_codes: dict[str, CodeType] | None = None  # source -> code, as read from the cache file
_read = False
_met: dict[str, CodeType] = {}  # the sources this process compiled or used


def compiled(source: str) -> CodeType:
    """`compile(source, "<string>", "exec")`, from the cache file when it holds this very source."""
    global _codes, _read
    if not _read:
        _read = True
        _codes = _read_codes()
        if _codes is not None:
            import atexit

            atexit.register(_keep_codes)
    code = _codes.get(source) if _codes is not None else None
    if code is None:
        code = compile(source, "<string>", "exec")
    _met[source] = code
    return code


def code_cache() -> str | None:
    """The cache file of this drover and this Python, or None when caches are off."""
    if os.environ.get("DROVER_NO_CACHE"):
        return None
    from . import __version__

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "drover", f"records-{__version__}-{sys.implementation.cache_tag}.marshal")


def _read_codes() -> dict[str, CodeType] | None:
    path = code_cache()
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            kept = marshal.loads(handle.read())
        python, codes = kept
        if python == sys.version and isinstance(codes, dict) and \
                all(type(key) is str and type(code) is CodeType for key, code in codes.items()):
            return codes
    except (OSError, EOFError, ValueError, TypeError):
        pass  # missing, truncated or not this Python's: compile, and write it anew
    return {}


def _keep_codes() -> None:
    """Write the cache file at exit when this process met a source it did not hold (atomically)."""
    path = code_cache()
    if path is None or _codes is None or all(source in _codes for source in _met):
        return
    # every source met now, with those kept for other commands (a few hundred at most)
    codes = {**(_codes if len(_codes) < 1000 else {}), **_met}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "wb") as handle:
            handle.write(marshal.dumps((sys.version, codes)))
        os.replace(partial, path)
    except OSError:
        pass  # an unwritable cache costs only the speed
