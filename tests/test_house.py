"""The house rules that a reader can count: no module of the package over 450 lines, and the
cache tiers named once (cache/policy.py), not as names spread through the index's SQL."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import imgwarm
from imgwarm.cache.index import Index
from imgwarm.cache.policy import BACKING, ROLES, TIERS, role_of

PACKAGE = Path(imgwarm.__file__).parent
LIMIT = 450


def test_no_module_of_the_package_is_over_450_lines() -> None:
    over = {str(path.relative_to(PACKAGE)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert over == {}


def test_the_index_names_tiers_only_through_their_policy() -> None:
    """Outside the migrations (history: what each version made, frozen), no module of the
    index spells a tier's name: its SQL takes each tier's column from the policy's roles."""
    spelled = re.compile(r"\b(?:" + "|".join(TIERS) + r")\b")
    found = {}
    for path in sorted((PACKAGE / "cache" / "index").glob("*.py")):
        if path.name == "schema.py":
            continue
        lines = [n for n, line in enumerate(path.read_text().splitlines(), 1)
                 if spelled.search(line.split("#")[0])]
        if lines:
            found[path.name] = lines
    assert found == {}


def test_the_schema_has_what_each_tier_s_role_asks(tmp_path: Path) -> None:
    """A state column for every tier and the partial indexes its role reads: what it holds in
    ranking order, what it holds that nobody names, what a killed run left; by width only a
    width-bounded tier's; what it lacks only the backing tier's. A tier added to the roles
    without a migration giving it these fails here."""
    index = Index(tmp_path / "index.sqlite")
    index.close(keep=True)
    db = sqlite3.connect(tmp_path / "index.sqlite")
    columns = {row[1] for row in db.execute("PRAGMA table_info(variants)")}
    indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert set(TIERS) <= columns
    for role in ROLES:
        t = role.name
        assert {f"kept_{t}", f"kept_gone_{t}", f"unsettled_{t}"} <= indexes
        assert (f"kept_wide_{t}" in indexes) == role.width_bounded
        assert (f"need_{t}" in indexes) == role.backing
    assert role_of(BACKING).backing and sum(role.backing for role in ROLES) == 1


def test_variant_keys_go_between_bytes_and_text_in_one_place() -> None:
    """A log reader keeps keys as bytes, the index as text: the conversion is
    placeable.key_bytes and key_text, nowhere else in the cache (the index's ``stored``
    spells a source key, another thing)."""
    found = {}
    for path in sorted((PACKAGE / "cache").rglob("*.py")):
        lines = [n for n, line in enumerate(path.read_text().splitlines(), 1)
                 if "surrogateescape" in line.split("#")[0]]
        if lines:
            found[str(path.relative_to(PACKAGE))] = len(lines)
    assert found == {"cache/placeable.py": 2, "cache/index/sources.py": 1}


def test_the_log_reader_has_one_way_and_checks_against_plain_data() -> None:
    """Access logs are read one way (blocks read here, weighed here or by forked parsers fed
    down pipes: no second pool, no cache between ways), and the snapshot paths are checked
    against is plain data, the same whichever process asks: no callback into the live index,
    nothing to strip before a fork."""
    import dataclasses

    from imgwarm.cache import logs, placeable

    source = Path(logs.__file__).read_text(encoding="utf-8")
    assert "ProcessPoolExecutor" not in source and "_formats" not in source
    assert "__reduce__" not in vars(placeable.Placeable)
    types = {f.name: f.type for f in dataclasses.fields(placeable.Placeable)}
    assert types == {"prefix": "str", "layout": "Layout", "index": "str | None",
                     "uncommitted": "frozenset[str]"}
    assert "getpid" not in Path(placeable.__file__).read_text(encoding="utf-8")
