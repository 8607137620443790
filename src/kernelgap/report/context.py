"""The result files of a reproduction folder as an experiment's ``section`` reads them
(:class:`Results`): its folder, run rows, step files, and the pools (:data:`.criteria.POOLS`).
"""

from __future__ import annotations

from pathlib import Path

from ..io import digest_problem, read_json, read_run_records
from .criteria import POOLS, run_row, unique
from .integrity import unsealed


class Results:
    """A reproduction folder read through its registered experiments."""

    def __init__(self, root: str | Path, experiments):
        self.root = Path(root)
        self.experiments = list(experiments)
        self._rows: dict[str, list[dict]] = {}
        self._pooled: dict[str, list[dict]] = {}

    def folder(self, name: str) -> Path:
        return self.root / name

    def read(self, name: str, file: str):
        """The payload of a step file; ``None`` when it is missing, unreadable or altered."""
        data = read_json(self.folder(name) / file)
        return None if isinstance(data, dict) and digest_problem(data) else unsealed(data)

    def records(self, name: str) -> list[dict]:
        return read_run_records(self.folder(name))

    def rows(self, name: str) -> list[dict]:
        """The experiment's runs as report rows (:func:`.criteria.run_row`)."""
        if name not in self._rows:
            self._rows[name] = [run_row(r) for r in self.records(name)]
        return self._rows[name]

    def pool(self, pool: str) -> list[str]:
        """The experiments whose runs join ``pool``, in registry order."""
        return [e.name for e in self.experiments if pool in e.pools]

    def pooled(self, pool: str) -> list[dict]:
        """Every run of the pool's experiments that passes its rule, each run once."""
        if pool not in self._pooled:
            keep = POOLS[pool]
            self._pooled[pool] = unique([r for name in self.pool(pool) for r in self.rows(name) if keep(r)])
        return self._pooled[pool]

    def witness_certified_rank(self) -> int | None:
        """The witness family's certified rank, from the first witness-pool experiment that has it."""
        for name in self.pool("witness"):
            cert = self.read(name, "certificate.json")
            if isinstance(cert, dict) and cert.get("certified_rank"):
                return cert["certified_rank"]
            certs = self.read(name, "certificates.json")
            for entry in certs.values() if isinstance(certs, dict) else ():
                if isinstance(entry, dict) and entry.get("family") == "witness" and entry.get("certified_rank"):
                    return entry["certified_rank"]
        return None
