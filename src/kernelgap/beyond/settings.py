"""``configs/<profile>/beyond.toml``: settings of the issue-#6 experiments that are not sweep fields.

    [precision]
    bits = [2, 3, 4, 6, 8, 12, 16]    # bits per sketch number
    quantizers = ["uniform"]          # "uniform" and/or "float" (models.sketch)

    [probe]
    target = "examples/decayed_linear_attention.py:DecayedLinearAttention"
    kwargs = {}
    profile = "quick"                 # the probe's own suite size (probe.suite)

A missing file or section means the defaults below.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..errors import ConfigError

DEFAULTS: dict[str, dict] = {
    "precision": {"bits": [2, 3, 4, 5, 6, 8, 10, 12, 16], "quantizers": ["uniform"]},
    "probe": {"target": "examples/decayed_linear_attention.py:DecayedLinearAttention",
              "kwargs": {}, "profile": "quick"},
}


def load_settings(folder: Path) -> dict[str, dict]:
    path = Path(folder) / "beyond.toml"
    out = {k: dict(v) for k, v in DEFAULTS.items()}
    if not path.is_file():
        return out
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    for section, values in data.items():
        if section not in DEFAULTS or not isinstance(values, dict):
            raise ConfigError(f"{path}: unknown section {section!r} (expected {', '.join(DEFAULTS)})")
        for key, value in values.items():
            if key not in DEFAULTS[section]:
                raise ConfigError(f"{path}: unknown key {section}.{key}")
            out[section][key] = value
    return out
