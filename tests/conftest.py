"""Shared test settings: CPU, deterministic, one thread, a fixed hypothesis profile."""

import os

import pytest
import torch
from hypothesis import settings

os.environ.setdefault("KERNELGAP_TEST", "1")
torch.set_num_threads(1)
torch.set_flush_denormal(True)

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.load_profile("ci")


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: returns (exit_code, stdout, stderr)."""
    from kernelgap.cli import main

    def run(*args: str):
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
