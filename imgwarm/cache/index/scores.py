"""The index's scores: request weights added to variants, the densities rank.py estimates,
re-ranked by source and by the site's width shares, in SQL (a Python function called for
every row of a large update costs more than the update). A part of ``Index`` (core.py), on
its connection."""

from __future__ import annotations

from collections.abc import Iterable

from imgwarm.cache.index.meta import Part
from imgwarm.cache.index.rows import IN_CHUNK
from imgwarm.cache.index.schema import tallies
from imgwarm.cache.rank import (
    AGE_FLOOR,
    PAGE,
    PRIOR_PERCENTILE,
    SHARE_PRIOR,
    YOUNG_FOR,
    Decay,
    class_weights,
    measure_shares,
)


class Scores(Part):
    """The scoring part of ``Index``: ``weights`` are the site's shares as last measured."""

    weights: dict[tuple[str, int], float]

    def add_scores(self, weights: dict[str, float]) -> int:
        """Add request weights to the variants at these paths; returns how many were ours.
        Their densities are those of their own score until ``rerank``."""
        before = self.db.total_changes
        self.db.executemany(
            "UPDATE variants SET score = score + ?1, "
            f"density = {density_sql('score + ?1', 'prior', 'bytes')} "
            "WHERE path = ?2",  # in key order: each B-tree page is visited once, not at random
            [(weights[path], path) for path in sorted(weights)])
        return self.db.total_changes - before

    def rerank(self, paths: Iterable[str], *, now: float, decay: Decay) -> int:
        """The densities of every variant of the sources of these paths (their scores moved)
        and of the sources with a young variant (its age moved), as rank.py estimates them:
        each variant's score corrected for its age, plus its prior, pooled over its source
        and shared out by each variant's own score plus SHARE_PRIOR requests now spread by
        the site's shares (measured on the sources ranked again). Returns how many sources
        were ranked again."""
        # (sources by their id in ``sources``: schema.py)
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS touched (source INTEGER PRIMARY KEY)")
        self.db.execute("DELETE FROM touched")
        found = sorted(set(paths))
        for at in range(0, len(found), IN_CHUNK):
            chunk = found[at:at + IN_CHUNK]
            self.db.execute(
                "INSERT OR IGNORE INTO touched SELECT source FROM refs "
                f"WHERE path IN ({','.join('?' * len(chunk))})", chunk)
        # The young: under a half-life old at every run (their estimate moves fastest), up to
        # YOUNG_FOR half-lives once an hour (a few percent an hour then)
        ages = 1.0
        if now - self.meta("young_ranked", float("-inf")) >= 3600.0:
            ages = YOUNG_FOR
            self.remember("young_ranked", now)
        self.db.execute(
            "INSERT OR IGNORE INTO touched SELECT r.source FROM variants v JOIN refs r "
            "ON r.path = v.path WHERE v.refs > 0 AND v.born IS NOT NULL AND v.born > ?",
            (now - ages * decay.half_life,))
        # each variant of those sources, with its value: its corrected score plus its prior
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS base (source INTEGER, path TEXT, "
                        "score REAL, format TEXT, class INTEGER, value REAL)")
        # (by source: the shares join a source's variants to its mean; a scan instead would
        # be sources x variants)
        self.db.execute("CREATE INDEX IF NOT EXISTS temp.base_by_source ON base (source)")
        self.db.execute("DELETE FROM base")
        self.db.execute(
            f"INSERT INTO base SELECT r.source, v.path, v.score, v.format, {_width_class('v')}, "
            f"{_estimate('v')} + v.prior FROM touched t CROSS JOIN refs r ON r.source = t.source "
            "CROSS JOIN variants v ON v.path = r.path WHERE v.refs > 0",  # (from the few)
            {"now": now, "half_life": decay.half_life})
        self._measure(now, decay)
        self.db.execute(
            "UPDATE variants SET density = e.estimate / "
            f"((max(bytes, 1) + {PAGE - 1}) / {PAGE} * {PAGE}) FROM ("
            "  WITH weighed AS MATERIALIZED ("
            "    SELECT b.source AS source, b.path AS path, b.score AS score, b.value AS value,"
            "           coalesce(s.weight, 1.0) AS weight"
            "    FROM base b LEFT JOIN shares s ON s.format = b.format AND s.class = b.class),"
            "  pooled AS (SELECT source, sum(value) AS total, sum(score) AS score,"
            "             sum(weight) AS weight FROM weighed GROUP BY source)"
            "  SELECT w.path AS path,"
            "        max(pooled.total * (w.score + ?1 * w.weight)"
            "            / (pooled.score + ?1 * pooled.weight)) AS estimate"
            "  FROM weighed w JOIN pooled ON pooled.source = w.source GROUP BY w.path"
            ") AS e WHERE variants.path = e.path", (SHARE_PRIOR * decay(now),))
        ranked: int = self.db.execute("SELECT count(*) FROM touched").fetchone()[0]
        return ranked

    def _measure(self, now: float, decay: Decay) -> None:
        """The site's shares (rank.measure_shares) with the sources about to be re-ranked
        (``base``), kept in the index and in the temporary table ``shares`` for rerank."""
        kept = {(fmt, cls): (score, mean) for fmt, cls, score, mean in self.meta("classes", [])}
        faded = 2.0 ** (-max(0.0, now - self.meta("classes_at", now)) / decay.half_life)
        shares = measure_shares(kept, faded, self.db.execute(
            "WITH pooled AS (SELECT source, total(score) / count(*) AS mean FROM base"
            "                GROUP BY source HAVING count(*) >= 2)"
            "SELECT b.format, b.class, total(b.score), total(s.mean) "
            "FROM base b JOIN pooled s ON s.source = b.source GROUP BY b.format, b.class"),
            decay(now))
        self.remember("classes", [[*key, *totals] for key, totals in sorted(shares.items())])
        self.remember("classes_at", now)
        self.weights = class_weights(shares)
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS shares (format TEXT, class INTEGER, "
                        "weight REAL, PRIMARY KEY (format, class)) WITHOUT ROWID")
        self.db.execute("DELETE FROM shares")
        self.db.executemany("INSERT INTO shares VALUES (?, ?, ?)",
                            [(fmt, cls, w) for (fmt, cls), w in self.weights.items()])

    def rescale(self, factor: float) -> None:
        """Multiply every score and prior (the decay's epoch moved, or its half-life)."""
        self.db.execute("UPDATE variants SET score = score * ?1, prior = prior * ?1, "
                        "density = density * ?1", (factor,))
        tallies(self.db)  # (counted again: the sums of a product, not of its deltas)

    def score_percentile(self, fraction: float) -> float | None:
        """The score ``fraction`` of the way up the scored variants, found from the last one
        found (``threshold``, and ``above``: how many score above it; both kept by the
        triggers, schema.py): ``by_score`` is walked as far as the percentile moved, not
        over the scored variants (the first time, from the top: the few above it)."""
        count, threshold, above = self.db.execute(
            "SELECT scored, threshold, above FROM requests").fetchone()
        if count <= 0:
            return None
        rank = count - 1 - min(count - 1, int(count * fraction))  # from the top, 0 first
        # (a bound of the walk's start written first: SQLite starts a range at the first)
        if threshold is None:
            walked = [s for (s,) in self.db.execute(
                "SELECT score FROM variants WHERE score > 0 AND refs > 0 "
                "ORDER BY score DESC LIMIT ?", (rank + 1,))]
            score, above = walked[-1], 0
        elif rank >= above:  # at or below the last: down from it
            walked = [s for (s,) in self.db.execute(
                "SELECT score FROM variants WHERE score <= ? AND score > 0 AND refs > 0 "
                "ORDER BY score DESC LIMIT ?", (threshold, rank - above + 1))]
            score = walked[-1]
        else:  # above it: up from it, and the ties of the one found (above it no more)
            walked = [s for (s,) in self.db.execute(
                "SELECT score FROM variants WHERE score > ? AND score > 0 AND refs > 0 "
                "ORDER BY score LIMIT ?", (threshold, above - rank))]
            score = walked[-1]
            above -= sum(1 for s in walked if s < score) + self.db.execute(
                "SELECT count(*) FROM variants WHERE score = ? AND score > 0 AND refs > 0",
                (score,)).fetchone()[0]
            walked = []
        above += sum(1 for s in walked if s > score)  # (walked down: those passed)
        self.db.execute("UPDATE requests SET threshold = ?, above = ?", (score, above))
        return float(score)

    def set_pinned(self, paths: set[str]) -> bool:
        """Pin these paths (a hot list), unpin the rest; True when anything changed."""
        now = {r[0] for r in self.db.execute("SELECT path FROM variants WHERE pinned = 1")}
        if now == paths:
            return False
        self.db.executemany("UPDATE variants SET pinned = 0 WHERE path = ?",
                            [(p,) for p in now - paths])
        self.db.executemany("UPDATE variants SET pinned = 1 WHERE path = ?",
                            [(p,) for p in paths - now])
        return True

    def hit_share(self) -> tuple[float, float]:
        """(decayed weight of the requests the RAM tier holds, of all requests to variants)."""
        total, in_ram = self.db.execute("SELECT total, in_ram FROM requests").fetchone()
        total = max(0.0, float(total))  # (sums kept by their changes: clamped, as they drift)
        return min(max(0.0, float(in_ram)), total), total

    def prior(self, now_weight: float) -> float:
        """The prior of a variant uploaded now (rank.py): the PRIOR_PERCENTILE score of the
        variants with traffic, or the weight of one request now while there is none."""
        return self.score_percentile(PRIOR_PERCENTILE) or now_weight


def density_sql(score: str, prior: str, size: str) -> str:
    """rank.density as an SQL expression (a Python function called for every row of a large
    update costs more than the update)."""
    return f"(({score}) + ({prior})) * 1.0 / ((max(({size}), 1) + {PAGE - 1}) / {PAGE} * {PAGE})"


def _estimate(v: str) -> str:
    """rank.estimate as an SQL expression of table ``v`` and :now, :half_life."""
    age = f"max(:now - {v}.born, {AGE_FLOOR})"
    return (f"(CASE WHEN {v}.born IS NULL OR {age} >= {YOUNG_FOR} * :half_life THEN {v}.score "
            f"ELSE {v}.score / (1.0 - power(2.0, -{age} / :half_life)) END)")


def _width_class(v: str) -> str:
    """rank.width_class as an SQL expression of table ``v``."""
    return f"CAST(round(2 * log2(max({v}.width, 1))) AS INTEGER)"
