"""User-facing errors.

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
