"""User-facing errors, and the one line each becomes (:func:`one_line`).

Anything the user can get wrong (a flag, a config, a family file, a results
folder) raises :class:`KernelgapError`; the CLI prints its message as one line
and exits with status 2.  Every other exception is a bug.
"""


class KernelgapError(Exception):
    """A problem with the user's input, described in one line."""


class FamilyError(KernelgapError):
    """A family (file or parameters) that is malformed or unsuitable."""


class ConfigError(KernelgapError):
    """A config file or config value that is malformed."""


def one_line(text: str) -> str:
    """``text`` with every character that would break or garble its line escaped as Python
    writes it (a newline in a path as ``\\n``, a lone surrogate as ``\\udcff``): control
    characters, line and paragraph separators and surrogates.  Every ``error: …`` line is
    printed through it, so a user's path or name never splits the one line in two."""
    return "".join(c.encode("unicode_escape").decode("ascii") if _breaks(c) else c for c in str(text))


def _breaks(char: str) -> bool:
    return (char < " " and char != "\t") or "\x7f" <= char <= "\x9f" or char in "\u2028\u2029" or _surrogate(char)


def _surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udfff"
