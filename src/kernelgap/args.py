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

**Numbers** — every float flag of the command line is finite and every flag that
:data:`~kernelgap.limits.FLAG_BOUNDS` names lies in its range (:func:`bounded_flags`), checked
as the flag is parsed: before any import of torch and before anything is written.

**Lists, pairs, JSON** — ``key=value`` pairs (the splitting only: a family's parameters are
typed by :func:`kernelgap.task.parse_params`), comma-separated integer lists kept in their
order (seeds, ranks), a JSON object, and the probe's constructor-argument map.

Every malformed text raises a one-line :class:`~kernelgap.errors.KernelgapError` naming the
flag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

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
    occurrences of a repeated flag.  Refused in one line, naming ``flag`` and ``what``: a
    text outside the grammar, a step below 1, an empty ``A..B``, more than
    :data:`MAX_RANGE_VALUES` values, or a value below ``least``."""
    if not isinstance(text, str):
        text = ",".join(text)
    items = [_item(part, text, flag) for part in text.split(",")]
    for lo, hi, step in items:
        if hi < lo:
            raise KernelgapError(f"{flag} {_shown(text)}: the range {lo}..{hi} is empty")
        _check_count((hi - lo) // step + 1, text, flag, what)
    values: set[int] = set()
    for lo, hi, step in items:
        values.update(range(lo, hi + 1, step))
    _check_count(len(values), text, flag, what)
    ordered = sorted(values)
    if least is not None and ordered[0] < least:
        raise KernelgapError(f"{flag} {_shown(text)}: each {what} must be ≥ {least}, got {ordered[0]}")
    return ordered


def _item(part: str, text: str, flag: str) -> tuple[int, int, int]:
    """One item of a range as ``(first, last, step)``."""
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


def key_values(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", …]`` → ``{"k": "v"}`` (both sides stripped; the values stay text)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise KernelgapError(f"parameter {pair!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def number(text: str) -> float | str:
    """``text`` as the float it spells (``nan`` and ``inf`` too), else the text itself (which
    the config model it is given to refuses in one line naming its key)."""
    try:
        return float(text)
    except ValueError:
        return text


def json_object(text: str | None, flag: str) -> dict:
    """A JSON object given as text; none: ``{}``."""
    if text is None:
        return {}
    value = plain_json(parse_json(text, flag, KernelgapError), flag)
    if not isinstance(value, dict):
        raise KernelgapError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def int_list(text: str | None, flag: str) -> list[int] | None:
    """``"8,16,32"`` → ``[8, 16, 32]``, in the order given (a list, not a range); none: None."""
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise KernelgapError(f"{flag} expects comma-separated integers, got {text!r}") from None
    if not values:
        raise KernelgapError(f"{flag} is empty")
    return values


def suite_ranks(values: list[str]) -> list[int] | dict[str, list[int]] | None:
    """``--ranks 8,16`` for every suite, or ``--ranks witness=8,16 --ranks ood-n4=4`` per suite."""
    if not values:
        return None
    if all("=" not in v for v in values):
        return int_list(",".join(values), "--ranks")
    return {name: int_list(text, f"--ranks {name}") for name, text in key_values(values).items()}


def argument_map(pairs: list[str]) -> dict:
    """``NAME=m|rank|d_model`` binds a size; ``NAME=<JSON>`` a constant (``heads=1``,
    ``causal=false``); any other text stays a string."""
    out = {}
    for key, value in key_values(pairs).items():
        if value in ("m", "rank", "d_model"):
            out[key] = value
            continue
        try:
            out[key] = json.loads(value)
        except (json.JSONDecodeError, UnicodeDecodeError):  # not JSON: the text itself
            out[key] = value
        except (ValueError, RecursionError, MemoryError):  # JSON no parser should take: refused
            parse_json(value, f"--arg {key}", KernelgapError)
    return plain_json(out, "--arg")


def plain_json(value, flag: str):
    """``value`` (JSON given on the command line) unless it nests deeper than
    :data:`~kernelgap.limits.MAX_JSON_DEPTH` or holds a string (or key) that is not UTF-8
    text (a lone surrogate such as ``"\\ud800"``): either would fail later, far from the flag
    (pickled for a worker, written to a record)."""
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
    """``command`` (a click command or group, and its subcommands) with every float flag
    finite and each flag :data:`~kernelgap.limits.FLAG_BOUNDS` names within its range, checked
    as the flag is parsed (a flag's callback: typer keeps the type to itself)."""
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
