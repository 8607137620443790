"""Which module a run trains, and with which constructor arguments (:class:`ModuleSpec`):
naming a module, loading it (:func:`load_target`) and turning whatever it raises into one
line (:func:`module_failures`), without importing torch first — the spec's fields and
arguments are refused before torch is imported, and making a valid spec loads its module, so
that its ``source_hash`` names the code it trains.  Modules written elsewhere: docs/experiments.md,
"Probe"; :mod:`.external` builds and trains them."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import math
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, model_validator

from ..errors import KernelgapError
from ..io import read_input
from ..limits import MAX_WIDTH
from ..validation import Config, between, invalid, one_of

INTERFACES = ("sequence", "layer")
#: Sizes an argument map can bind a constructor argument to.
BINDINGS = ("m", "rank", "d_model")
Interface = one_of(INTERFACES)


class ModuleError(KernelgapError):
    """A module or target that does not follow the interface."""


def non_finite(value, path: str) -> tuple[str, float] | None:
    """``(path, number)`` of the first NaN or infinity in a constructor value (nested
    lists and tables too), or None: such a number has no place in strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub, item in items:
        found = non_finite(item, sub)
        if found:
            return found
    return None


def argument_problem(kwargs: dict, args: dict) -> tuple[str | None, str] | None:
    """``(path, text)`` of the first constructor value that cannot be stored or means two
    things — a NaN or an infinity (nested too), or an argument given both as a keyword and
    in the argument map — or None: ``text`` is said of the key ``path`` below the spec (of the
    spec itself where ``path`` is None)."""
    for name, table in (("kwargs", kwargs), ("args", args)):
        if not isinstance(table, dict):
            return name, f"must be a table of constructor arguments, got {table!r}"
        found = non_finite(table, name)
        if found:
            return found[0], (
                f"must be a finite number, got {found[1]} (constructor arguments "
                "are stored in strict JSON: no NaN or infinity)"
            )
    both = sorted(set(kwargs) & set(args))
    if both:
        return None, f"{both[0]!r} is given both in kwargs and in the argument map args"
    return None


def check_arguments(kwargs: dict, args: dict, where: str = "model.module") -> None:
    """Constructor values that can be stored and mean one thing (:func:`argument_problem`),
    checked before the module is imported."""
    problem = argument_problem(kwargs, args)
    if problem:
        name = ".".join(part for part in (where, problem[0]) if part)
        raise ModuleError(f"{name}: {problem[1]}" if name else problem[1])


class ModuleSpec(Config):
    """Which module, with which constructor arguments, behind which interface.

    Making a spec imports the target and sets ``source_hash`` to its source's SHA-256
    (a given one must match it), so every module run — from the probe or from a sweep
    file — is named by the code it trains.  An argument map must bind ``rank``."""

    model_config = ConfigDict(frozen=True)
    WHERE: ClassVar[str] = "model.module"

    target: str = Field(description="package.module:Class or path/to/file.py:Class")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="constructor keyword arguments")
    interface: Interface = "sequence"
    d_model: between(1, MAX_WIDTH) = Field(32, description="embedding width given to a 'layer' module")
    args: dict[str, Any] = Field(
        default_factory=dict, description="argument map: constructor argument → 'm', 'rank', 'd_model' or a constant"
    )
    output: int | None = Field(None, description="index of the prediction in a tuple the module returns")
    source_hash: str = Field("", description="computed from the source; a given one must match it")

    @model_validator(mode="after")
    def _module(self) -> ModuleSpec:
        problem = argument_problem(self.kwargs, self.args)
        if problem:
            raise invalid(problem[1], path=problem[0])
        actual = vouched_hash(self.target)  # a module a child checked for this process: not run here
        cls = load_target(self.target) if actual is None else None  # a one-line ModuleError of its own
        actual = source_hash(cls) if actual is None else actual
        if self.source_hash and self.source_hash != actual:
            raise ModuleError(
                f"source_hash {self.source_hash[:12]}… does not match the source of "
                f"{target_label(self.target)} (sha256 {actual[:12]}…): the module changed since "
                "the hash was written; leave source_hash out, it is computed from the source"
            )
        object.__setattr__(self, "source_hash", actual)
        if cls is not None:  # a vouched module was checked by the child that imported it
            check_rank_binding(cls, self)
        return self

    @property
    def rank_free(self) -> bool:
        """An argument map that binds no constructor argument to ``rank``: every rank would
        build the same module, so the probe trains it at one rank (:func:`check_rank_binding`)."""
        return bool(self.args) and "rank" not in [v for v in self.args.values() if isinstance(v, str)]


def check_rank_binding(cls: type, spec: ModuleSpec) -> None:
    """Refuse a rank-free argument map that leaves unbound a constructor argument named like a
    state size (:data:`STATE_SIZE`): the rank was likely forgotten, not absent."""
    if spec.rank_free and (likely := likely_rank(cls, spec)):
        raise invalid(
            f"binds no constructor argument to rank, so every rank would train the same "
            f"module: bind {likely} to it (--arg {likely}=rank), or to a constant if it is not the "
            f"state size (--arg {likely}=null)",
            path="args",
        )


#: Targets a child process imported and checked for this one (:mod:`kernelgap.probe.leash`):
#: target → (the file its class is defined in, or "", and that file's SHA-256).
_VOUCHED: dict[str, tuple[str, str]] = {}


def vouch(target: str, path: str, digest: str) -> None:
    """Record that a child process imported ``target``, whose class is defined in ``path``
    (bytes of SHA-256 ``digest``): specs of it are then made without importing it here."""
    _VOUCHED[target] = (path, digest)


def vouched_hash(target: str) -> str | None:
    """The source hash of a vouched ``target`` whose file still holds the bytes the child
    read (None otherwise: the module is imported to tell)."""
    path, digest = _VOUCHED.get(target, ("", None))
    if digest is None or not path:
        return digest
    try:
        return digest if hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest else None
    except OSError:
        return None


def source_file(cls: type, target: str) -> str:
    """The file :func:`source_hash` hashes for ``target``'s class ``cls`` ("" when it has
    none): a file target's own path (absolute in a spec), else the file defining ``cls``."""
    module, _ = split_target(target)
    if module.endswith(".py"):
        return module
    try:
        return inspect.getsourcefile(cls) or ""
    except TypeError:
        return ""


class ModuleImportError(ModuleError):
    """A target whose module cannot be imported (a library that is not installed, say)."""


class LibraryImportError(ModuleImportError):
    """A ``package.module`` target that is not installed (a module file that is missing or does
    not import is a plain :class:`ModuleImportError`: no library to install)."""


class ModuleFailure(ModuleError):
    """The module itself raised — while importing, building, being checked or training."""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def describe(exc: BaseException) -> str:
    """``Type: message`` in one line (``SystemExit(3)`` for an exit; a kernelgap error's message)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    if isinstance(exc, KernelgapError):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)}"


def target_label(target: str) -> str:
    """How a target is shown in messages: ``file.py:Class`` or ``pkg.mod:Class``."""
    module, sep, attr = target.rpartition(":")
    if sep and module.endswith(".py"):
        return f"{Path(module).name}:{attr}"
    return target


def failure(target: str, phase: str, exc: BaseException, detail: str = "") -> ModuleFailure:
    """``module file.py:Class failed while PHASE DETAIL: Type: message``, one line."""
    return ModuleFailure(f"module {target_label(target)} failed while {phase}{detail}: {describe(exc)}")


@contextlib.contextmanager
def module_failures(target: str | None, phase: str, detail: str = ""):
    """Turn whatever the module raises meanwhile into one :class:`ModuleFailure` line
    (:func:`failure`).  ``SystemExit`` is caught too (a module must not end the process);
    ``KeyboardInterrupt`` is not.  A :class:`ModuleFailure` passes as it is, and so do
    kernelgap errors that are not about the module (a family file, a folder);
    ``target=None`` guards nothing."""
    if target is None:
        yield
        return
    try:
        yield
    except ModuleFailure:
        raise
    except KernelgapError as exc:
        if not isinstance(exc, ModuleError):
            raise
        raise failure(target, phase, exc, detail) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - anything the user's code raises
        raise failure(target, phase, exc, detail) from None


#: Parts of constructor argument names that usually set a module's state size, likeliest first.
STATE_SIZE = ("feature", "rank", "state", "key_dim", "dim_head", "head_dim", "expand")


def likely_rank(cls: type, spec: ModuleSpec) -> str | None:
    """The unbound constructor argument named like a state size, likeliest first, or None;
    one whose default is a bool is a switch (``low_rank_gates=True``), never a size."""
    free = free_arguments(cls, spec)  # [] where the signature cannot be read
    defaults = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()} if free else {}
    free = [n for n in free if not isinstance(defaults.get(n), bool)]
    return next((n for part in STATE_SIZE for n in free if part in n.lower()), None)


def free_arguments(cls: type, spec: ModuleSpec | None = None) -> list[str]:
    """``cls``'s constructor arguments that can be given by name and ``spec`` leaves unbound."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return []
    given = {*spec.args, *spec.kwargs} if spec is not None else set()
    return [
        n
        for n, p in params.items()
        if n not in {*given, "self"} and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def split_target(target: str) -> tuple[str, str]:
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ModuleError(f"target {target!r} must look like package.module:Class or file.py:Class")
    return module_name, attr


#: Attribute of a module loaded from a file: the SHA-256 of the bytes it was loaded from.
SOURCE_ATTR = "__kernelgap_sha256__"


def load_target(target: str) -> type:
    """``pkg.mod:Class`` or ``path/to/file.py:Class`` → the class (one-line errors).

    A file is loaded once per content: an edited file is loaded anew (its runs are new
    runs), so a process never trains stale code under a new hash."""
    module_name, attr = split_target(target)
    if module_name.endswith(".py"):
        module = _load_file(target, Path(module_name))
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            hint = ""
            if Path(module_name.replace(".", "/") + ".py").is_file():
                hint = (
                    f" (the file {module_name.replace('.', '/')}.py is here: give it as "
                    f"{module_name.replace('.', '/')}.py:{attr}, or run with PYTHONPATH=.)"
                )
            raise LibraryImportError(f"cannot import module {module_name!r}: {one_line(exc)}{hint}") from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the module's
            raise failure(target, "importing", exc) from None
    try:
        cls = getattr(module, attr)
    except AttributeError:
        raise ModuleError(f"module {module_name!r} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a module-level __getattr__
        raise failure(target, "importing", exc) from None
    from torch import nn  # a module's class is checked once it is loaded

    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ModuleError(f"{target} is not a torch.nn.Module subclass")
    return cls


def _load_file(target: str, path: Path):
    if not path.exists():  # as a module not installed: a profile lists its probe as not probed
        raise ModuleImportError(f"module file {path} does not exist")
    raw = read_input(path, "module file", ModuleError)
    digest = hashlib.sha256(raw).hexdigest()
    name = f"kernelgap_external_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}_{digest[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    setattr(module, SOURCE_ATTR, digest)
    sys.modules[name] = module  # as an import would: dataclasses and pickling look it up
    try:
        exec(compile(raw, str(path), "exec"), module.__dict__)  # noqa: S102 - the very bytes hashed above
    except ImportError as exc:
        sys.modules.pop(name, None)
        raise ModuleImportError(f"cannot import {path}: {type(exc).__name__}: {one_line(exc)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the module's
        sys.modules.pop(name, None)
        raise failure(target, "importing", exc) from None
    return module


def source_hash(cls: type) -> str:
    """SHA-256 of the file that defines ``cls`` ("" when it has none); for a class of a
    module file, of the bytes it was loaded from."""
    stored = getattr(sys.modules.get(cls.__module__), SOURCE_ATTR, None)
    if stored:
        return stored
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    except OSError:
        return ""
