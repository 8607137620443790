"""The docs' tables of the registries are generated from them (``make docs``) and current."""

import importlib.util
from pathlib import Path

import pytest

from kernelgap.experiments.registry import BUILTIN
from kernelgap.models.feature_maps import FEATURE_MAPS

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "tools" / "doc_tables.py")
doc_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_tables)
TABLES, refresh_tables, refreshed = doc_tables.TABLES, doc_tables.refresh_tables, doc_tables.refreshed
conclusions_table, experiments_table = doc_tables.conclusions_table, doc_tables.experiments_table
feature_maps_table = doc_tables.feature_maps_table


def test_every_generated_table_is_current():
    assert refresh_tables(ROOT, write=False) == [], "run `make docs`"


def test_a_table_out_of_date_is_found_and_rewritten(tmp_path):
    """A table that no longer lists its registry (a map or an experiment added since) is named,
    then rewritten to the current one; the rest of the page is left as it was."""
    for page in ("README.md", "docs/experiments.md"):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        text = (ROOT / page).read_text(encoding="utf-8")
        for name in TABLES:
            if TABLES[name][0] == page:
                text = refreshed(text, name, "| an old row |")
        (tmp_path / page).write_text(text, encoding="utf-8")
    stale = ["docs/experiments.md: experiments", "docs/experiments.md: conclusions", "README.md: feature-maps"]
    assert refresh_tables(tmp_path, write=False) == stale
    assert refresh_tables(tmp_path) == stale
    for page in ("README.md", "docs/experiments.md"):
        assert (tmp_path / page).read_text(encoding="utf-8") == (ROOT / page).read_text(encoding="utf-8")


def test_the_tables_list_every_registered_experiment_and_map():
    rows = experiments_table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{e.name}`" for e in BUILTIN]
    assert [row.split(" | ")[0] for row in feature_maps_table().splitlines()[2:]] == [f"| `{n}`" for n in FEATURE_MAPS]
    assert len(conclusions_table().splitlines()) == 2 + sum(e.conclusions is not None for e in BUILTIN)
    assert "| `exact_wall` | The exact wall on the cube | " in experiments_table()
    assert "| `table` | `θ[token]`, free | ≥ 0 | log | 0.01 |" in feature_maps_table()
    assert "| `signed` | `MLP(x)` | signed |  | 0.003 |" in feature_maps_table()


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="no markers of the generated table 'x'"):
        refreshed("text", "x", "| a |")
    text = "a\n<!-- generated: x (make docs) -->\nold\n<!-- end: x -->\nb"
    assert refreshed(text, "x", "new") == "a\n<!-- generated: x (make docs) -->\nnew\n<!-- end: x -->\nb"
