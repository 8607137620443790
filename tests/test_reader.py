"""The one reader (kernelgap.io): every JSON or TOML input, and every reader built on it,
turns each way a file can fail into one line of its error (or ``None`` for
:func:`~kernelgap.io.read_json`): missing, a folder, a pipe, a sparse 1 TB file (refused from
its size, never read), bad UTF-8, a syntax error, nesting too deep for the parser, an integer
past Python's int-string digit limit, no memory.  No reader changes the process's state."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import kernelgap.io
from kernelgap.args import argument_map, json_object
from kernelgap.errors import KernelgapError
from kernelgap.experiments.probe.section import read_probe_meta
from kernelgap.experiments.profile import load_profile
from kernelgap.io import MAX_INPUT_BYTES, load_json, load_toml, parse_json, read_input, read_json
from kernelgap.reproduction.compare import _read as read_summary
from kernelgap.sweeps.config import load_sweep
from kernelgap.task import load_family

DIGITS = "1" + "0" * 5000  # past Python's default limit of 4,300 digits

#: Each failure kind: the bytes of a JSON file and of a TOML file (None: not a file's content).
KINDS = {
    "missing": None,
    "folder": None,
    "pipe": None,
    "sparse": None,
    "bad-utf8": (b'{"m": "\xff\xfe"}', b'm = "\xff\xfe"\n'),
    "syntax": (b'{"m": 3,\n  "n": }', b"m = 3\n[[[\n"),
    "deep": (b"[" * 100_000, b"a = " + b"[" * 100_000),
    "huge-int": (f'{{"m": {DIGITS}}}'.encode(), f"m = {DIGITS}\n".encode()),
}


def load_probe(path: Path):
    return read_probe_meta(path.parent)


def load_compare(path: Path):
    return read_summary(path.parent)


def load_profile_file(path: Path):
    return load_profile(path.parent)


#: Each reader: (name of the file it reads, JSON or TOML, how to call it on that file's path).
READERS = {
    "load_json": ("x.json", "json", lambda p: load_json(p, "input", KernelgapError)),
    "load_toml": ("x.toml", "toml", lambda p: load_toml(p, "input", KernelgapError)),
    "read_input": ("x.json", "json", lambda p: read_input(p, "input", KernelgapError)),
    "family file": ("family.json", "json", load_family),
    "sweep file": ("sweep.toml", "toml", load_sweep),
    "profile.toml": ("profile.toml", "toml", load_profile_file),
    "probe.json": ("probe.json", "json", load_probe),
    "summary.json": ("summary.json", "json", load_compare),
}

#: Kinds a reader of bytes (no parsing) refuses: those of the file, not of its content.
FILE_KINDS = {"missing", "folder", "pipe", "sparse"}


def make_sparse(path: Path, size: int = 1 << 40) -> None:
    """A sparse file of ``size`` bytes (skips where the filesystem cannot hold one)."""
    try:
        with open(path, "wb") as fh:
            fh.truncate(size)
    except OSError as exc:
        path.unlink(missing_ok=True)
        pytest.skip(f"no sparse files here: {exc}")
    if os.stat(path).st_blocks * 512 > 1 << 20:
        path.unlink()
        pytest.skip("this filesystem does not make sparse files")


def make_input(tmp_path: Path, name: str, fmt: str, kind: str) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / name
    if kind == "folder":
        path.mkdir()
    elif kind == "pipe":
        os.mkfifo(path)
    elif kind == "sparse":
        make_sparse(path)
    elif kind != "missing":
        path.write_bytes(KINDS[kind][0 if fmt == "json" else 1])
    return path


def never_open(*args, **kwargs):
    raise AssertionError("the file was opened")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_every_failure_in_one_line(tmp_path, monkeypatch, reader, kind):
    name, fmt, read = READERS[reader]
    if reader == "read_input" and kind not in FILE_KINDS:
        pytest.skip("read_input returns the bytes; their content is its callers' to parse")
    path = make_input(tmp_path, name, fmt, kind)
    if kind in ("sparse", "pipe", "folder"):  # refused from the file's metadata, never opened
        monkeypatch.setattr(kernelgap.io, "open", never_open, raising=False)
    expected = expected_words(reader, kind)
    digits = sys.get_int_max_str_digits()
    if expected is None:
        assert read(path) is None
        return
    with pytest.raises(KernelgapError) as info:
        read(path)
    message = str(info.value)
    assert "\n" not in message and expected in message, message
    assert name in message, message
    assert sys.get_int_max_str_digits() == digits  # no process-wide change


#: The words of each failure in the reader's line.
WORDS = {
    "missing": "does not exist",
    "folder": "is a folder",
    "pipe": "not a regular file",
    "sparse": "too large",
    "huge-int": "4300 digits",
    "deep": "nested too deeply",
    "bad-utf8": "not UTF-8",
    "syntax": "at line 2",
}


def expected_words(reader: str, kind: str) -> str | None:
    """What the reader's line says (None: the reader returns None, as for no file at all)."""
    if reader == "probe.json":  # none: not a probe folder; anything else: set aside in its words
        return None if kind == "missing" else "probe.json is corrupted (not valid JSON)"
    if reader == "summary.json":
        return "holds no summary.json" if kind in ("missing", "folder", "pipe") else "is damaged (not valid JSON)"
    if reader == "profile.toml" and kind == "missing":
        return "unknown profile"
    return WORDS[kind]


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"missing"}))
def test_read_json_returns_none_for_every_failure(tmp_path, kind):
    assert read_json(make_input(tmp_path, "x.json", "json", kind)) is None
    assert read_json(tmp_path / "nothing.json") is None


def test_a_large_file_is_refused_from_its_size_before_reading(tmp_path, monkeypatch):
    """The limit is the file's size: one byte past it is refused without opening the file,
    a file at it is read."""
    monkeypatch.setattr(kernelgap.io, "MAX_INPUT_BYTES", 64)
    at, past = tmp_path / "at.json", tmp_path / "past.json"
    at.write_text("[" + " " * 62 + "]")
    past.write_text("[" + " " * 63 + "]")
    assert load_json(at, "input", KernelgapError) == []
    monkeypatch.setattr(kernelgap.io, "open", never_open, raising=False)
    with pytest.raises(KernelgapError, match=r"too large \(65 bytes"):
        load_json(past, "input", KernelgapError)


def test_the_limit_holds_any_family_file_kernelgap_writes():
    """1 GiB: far above the family files the registered families write (a few MiB)."""
    assert MAX_INPUT_BYTES >= 1 << 30


def test_no_memory_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(json, "loads", no_memory)
    with pytest.raises(KernelgapError, match="too large to parse") as info:
        load_json(path, "input", KernelgapError)
    assert "\n" not in str(info.value)
    assert read_json(path) is None


def test_unreadable_file_is_one_line(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "x.json"
    path.write_text("{}")
    path.chmod(0)
    with pytest.raises(KernelgapError, match="cannot be read"):
        load_json(path, "input", KernelgapError)


@pytest.mark.parametrize(
    "text, expected",
    [
        (f'{{"a": {DIGITS}}}', "--kwargs is not usable JSON (Exceeds the limit"),
        ("[" * 100_000, "--kwargs is not valid JSON (nested too deeply)"),
        ('{"a": }', "--kwargs is not valid JSON (Expecting value at line 1 column 7)"),
        ("", "--kwargs is not valid JSON"),
    ],
)
def test_flag_json_is_one_line(text, expected):
    with pytest.raises(KernelgapError) as info:
        json_object(text, "--kwargs")
    assert str(info.value).startswith(expected), info.value
    with pytest.raises(KernelgapError):
        parse_json(text, "--kwargs", KernelgapError)


@pytest.mark.parametrize("value", [DIGITS, "[" * 100_000, f"[{DIGITS}]"])
def test_an_argument_json_no_parser_takes_is_refused(value):
    """``--arg`` keeps text that is not JSON as text; JSON past the parser's limits is refused."""
    with pytest.raises(KernelgapError, match="^--arg x is not"):
        argument_map([f"x={value}"])
    assert argument_map(["x=hello", "y=[1, 2]", "z=m"]) == {"x": "hello", "y": [1, 2], "z": "m"}


def test_a_module_file_is_read_through_the_reader(tmp_path):
    """A sparse 1 TB module file, or a folder, is refused before torch compiles a byte."""
    from kernelgap.models.external import ModuleError, load_target

    sparse = tmp_path / "big.py"
    make_sparse(sparse)
    with pytest.raises(ModuleError, match="too large"):
        load_target(f"{sparse}:Cls")
    (tmp_path / "dir.py").mkdir()
    with pytest.raises(ModuleError, match="is a folder"):
        load_target(f"{tmp_path / 'dir.py'}:Cls")
