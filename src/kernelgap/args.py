"""Argument types: the text of a flag (or of a file value written the same way) read as a value.

**Ranges** — one grammar for every flag and file value that takes a set of integers
(``verify --length``, ``bound-curve --m`` and ``--length``, a profile's ``[bound_curve] m``,
``[context] m`` and its curves' ``length``): a comma-separated list of items, each

* ``A`` — the one value A;
* ``A..B`` — every integer from A to B, both included;
* ``A..B..STEP`` — A, A + STEP, … up to B (STEP ≥ 1).

The values are the union of the items, sorted, each once: ``1..3,8`` is 1, 2, 3, 8 and
``12..24..4`` is 12, 16, 20, 24.  A repeated flag is one list (``--length 4 --length 1..2``
is ``1..2,4``).  Each item is counted by arithmetic before it is listed, so ``2..10^30`` is
refused at once; a range lists at most :data:`MAX_RANGE_VALUES` values.

**Numbers** — every float flag is finite and every flag :data:`~kernelgap.limits.FLAG_BOUNDS`
names lies in its range (:func:`bounded_flags`), checked as the flag is parsed, before torch.

**Config fields** — a command whose flags are a config model's fields takes them as
:func:`field_flags` makes them: each flag, its help and its default said once, by the field.

Every malformed text raises a one-line :class:`~kernelgap.errors.KernelgapError` naming the flag.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import KernelgapError
from .io import parse_json
from .limits import FLAG_BOUNDS, MAX_CURVE_POINTS, MAX_JSON_DEPTH, number_problem

#: Most values one range lists (a range is at most one curve's points).
MAX_RANGE_VALUES = MAX_CURVE_POINTS
#: The range grammar, as error messages name it.
RANGE_SHAPES = "A, A..B, A..B..STEP (integers) or a comma list of them"
_ITEM = re.compile(r"\s*(-?\d+)(?:\.\.(-?\d+)(?:\.\.(-?\d+))?)?\s*", re.ASCII)


def parse_range(text: str | Iterable[str], flag: str, what: str = "value", least: int | None = None) -> list[int]:
    """The sorted distinct integers a range names (module docstring); ``text`` may be the
    occurrences of a repeated flag.  A value below ``least`` is refused too."""
    if not isinstance(text, str):
        text = ",".join(text)
    values: set[int] = set()
    for lo, hi, step in [_item(part, text, flag) for part in text.split(",")]:  # every item read first
        if hi < lo:
            raise KernelgapError(f"{flag} {_shown(text)}: the range {lo}..{hi} is empty")
        _check_count((hi - lo) // step + 1, text, flag, what)  # counted before it is listed
        values.update(range(lo, hi + 1, step))
    _check_count(len(values), text, flag, what)
    ordered = sorted(values)
    if least is not None and ordered[0] < least:
        raise KernelgapError(f"{flag} {_shown(text)}: each {what} must be ≥ {least}, got {ordered[0]}")
    return ordered


def _item(part: str, text: str, flag: str) -> tuple[int, int, int]:
    """``(first, last, step)``."""
    match = _ITEM.fullmatch(part)
    try:
        lo, hi, step = (None if g is None else int(g) for g in match.groups())
    except (AttributeError, ValueError):  # no match, or more digits than int() reads
        raise KernelgapError(f"{flag} must look like {RANGE_SHAPES}; got {_shown(text)}") from None
    if step is not None and step < 1:
        raise KernelgapError(f"{flag} {_shown(text)}: the step of {part.strip()} must be ≥ 1")
    return lo, lo if hi is None else hi, step or 1


def _check_count(count: int, text: str, flag: str, what: str) -> None:
    if count > MAX_RANGE_VALUES:
        raise KernelgapError(
            f"{flag} {_shown(text)} gives {count:,} values of {what}; a range has at most {MAX_RANGE_VALUES:,}"
        )


def _shown(text: str, most: int = 80) -> str:
    """``repr(text)``, its middle cut out past ``most`` characters (a message stays one short line)."""
    return repr(text) if len(text) <= most else repr(text[: most // 2]) + "…" + repr(text[-most // 4 :])


def key_values(pairs: Iterable[str], what: str = "parameter") -> dict[str, str]:
    """``["k=v", …]`` → ``{"k": "v"}`` (both sides stripped; the values stay text)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise KernelgapError(f"{what} {pair!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def json_object(text: str, flag: str) -> dict:
    value = plain_json(parse_json(text, flag, KernelgapError), flag)
    if not isinstance(value, dict):
        raise KernelgapError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def int_list(text: str, flag: str) -> list[int]:
    """``"8,16,32"`` → ``[8, 16, 32]``, in the order given (a list, not a range)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise KernelgapError(f"{flag} expects comma-separated integers, got {text!r}") from None
    if not values:
        raise KernelgapError(f"{flag} is empty")
    return values


def suite_ranks(values: list[str], flag: str = "--ranks") -> list[int] | dict[str, list[int]]:
    """``--ranks 8,16`` for every suite, or ``--ranks witness=8,16 --ranks ood-n4=4`` per suite
    (``ood-n4=`` leaves that suite out)."""
    if all("=" not in v for v in values):
        return int_list(",".join(values), flag)
    pairs = key_values(values, flag).items()
    return {name: int_list(text, f"{flag} {name}") if text.strip() else [] for name, text in pairs}


def number_map(pairs: list[str], flag: str) -> dict[str, float | str]:
    """``["step=60", …]`` → ``{"step": 60.0}``: each value the float it spells, else the text
    itself, for the config model to refuse naming its key."""
    out: dict[str, float | str] = {}
    for key, text in key_values(pairs, flag).items():
        try:
            out[key] = float(text)
        except ValueError:
            out[key] = text
    return out


def argument_map(pairs: list[str], flag: str = "--arg") -> dict:
    """``NAME=m|rank|d_model`` binds a size; ``NAME=<JSON>`` a constant (``heads=1``,
    ``causal=false``); any other text stays a string."""
    out = {}
    for key, value in key_values(pairs, flag).items():
        if value in ("m", "rank", "d_model"):
            out[key] = value
            continue
        try:
            out[key] = json.loads(value)
        except (json.JSONDecodeError, UnicodeDecodeError):  # not JSON: the text itself
            out[key] = value
        except (ValueError, RecursionError, MemoryError):  # JSON no parser should take: refused
            parse_json(value, f"{flag} {key}", KernelgapError)
    return plain_json(out, flag)


def plain_json(value, flag: str):
    """``value`` (JSON given on the command line) unless it nests deeper than
    :data:`~kernelgap.limits.MAX_JSON_DEPTH` or holds a string (or key) that is not UTF-8
    text (a lone surrogate): either would fail later, far from the flag."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise KernelgapError(f"{flag} nests deeper than {MAX_JSON_DEPTH} levels")
        texts = [item] if isinstance(item, str) else list(item) if isinstance(item, dict) else []
        for text in texts:
            if isinstance(text, str) and any("\ud800" <= c <= "\udfff" for c in text):
                raise KernelgapError(f"{flag} holds text that is not UTF-8 (a lone surrogate): {text!r:.60}")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return value


def bounded_flags(command):
    """``command`` (a click command or group, and its subcommands) with its number flags bounded
    (module docstring) by a callback each: typer keeps the type to itself."""
    for sub in getattr(command, "commands", {}).values():
        bounded_flags(sub)
    for param in command.params:
        if param.callback is None:  # a number flag has none; an eager one (--version) keeps its own
            param.callback = _bounded(max(param.opts, key=len))
    return command


def _bounded(flag: str):
    def check(ctx, param, value):
        for number in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                problem = number_problem(number, *FLAG_BOUNDS.get(flag, (None, None)))
                if problem:
                    raise KernelgapError(f"{flag}{problem}")
        return value

    return check


@dataclass(frozen=True)
class Flag:
    """A config field's flag where the field's name and type do not spell it: its name,
    ``read(text, flag)`` for a value no flag type spells (``many``: the texts of a repeated
    flag), and the ``metavar`` its help shows."""

    name: str = ""
    read: Callable | None = None
    many: bool = False
    metavar: str | None = None

    def of(self, field: str) -> str:
        return self.name or "--" + field.replace("_", "-")


#: ``kernelgap probe``'s flags that their :class:`~kernelgap.probe.config.ProbeConfig` fields do not spell.
PROBE_FLAGS = {
    "kwargs": Flag(read=json_object, metavar="JSON"),
    "args": Flag("--arg", argument_map, many=True, metavar="NAME=m|rank|d_model|JSON"),
    "ranks": Flag(read=suite_ranks, many=True, metavar="8,16|SUITE=8,16"),
    "seeds": Flag(read=int_list, metavar="0,1,2"),
    "time_limits": Flag("--time-limit", number_map, many=True, metavar="PHASE=SECONDS"),
}


def field_flags(fields: dict, flags: dict[str, Flag]) -> list[inspect.Parameter]:
    """One keyword parameter per config field (``{name: pydantic FieldInfo}``), as typer reads a
    flag from a signature: ``--field-name`` unless ``flags`` names it, its help the field's
    description, its text read as the int, float or str the field holds (a bool: ``--x/--no-x``)
    or by its :class:`Flag`.  A flag not given is None, so that the field keeps its model's
    default (:func:`given_fields`); a required field is an argument."""
    import typer

    out = []
    for name, field in fields.items():
        flag = flags.get(name, Flag())
        kind = (list[str] if flag.many else str) if flag.read else _flag_type(field.annotation)
        if field.is_required():
            default = typer.Argument(..., help=_help(field))
        else:
            decl = f"{flag.of(name)}/--no-{flag.of(name)[2:]}" if kind is bool else flag.of(name)
            text = _help(field) + (" Repeatable." if flag.many else "")
            default = typer.Option(None, decl, help=text, metavar=flag.metavar, show_default=False)
            kind = kind | None
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind))
    return out


def field_signature(command, fields: dict | None = None, flags: dict[str, Flag] | None = None) -> inspect.Signature:
    """``command``'s signature with the flags of ``fields`` (:func:`field_flags`) in place of its
    ``*``, which its ``**given`` receives (typer reads the flags from the signature)."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    at = sum(p.kind != p.KEYWORD_ONLY for p in own)
    return signature.replace(parameters=own[:at] + field_flags(fields or {}, flags or {}) + own[at:])


def given_fields(values: dict, flags: dict[str, Flag] | None = None) -> dict:
    """The fields a command line gave (a flag not given is None), each read by its :class:`Flag`."""
    out = {}
    for name, value in values.items():
        flag = (flags or {}).get(name, Flag())
        if value is not None:
            out[name] = flag.read(value, flag.of(name)) if flag.read else value
    return out


def _flag_type(annotation) -> type:
    """int, float or bool where a field holds one (its first type of a union), else str."""
    while typing.get_origin(annotation) in (typing.Annotated, typing.Union, types.UnionType):
        annotation = typing.get_args(annotation)[0]
    return annotation if annotation in (int, float, bool) else str


def _help(field) -> str:
    """A field's description as a flag's help, a sentence, with its default where that is a
    number, a word or on/off and the description does not say its default itself."""
    text, default = field.description or "", field.default
    if isinstance(default, (int, float, str)) and "default" not in text:
        text += f" (default {'on' if default is True else 'off' if default is False else default})"
    return text[:1].upper() + text[1:] + "."
