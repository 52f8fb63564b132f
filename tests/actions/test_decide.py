"""The pure judgement of the actions: index operation choice, watermark value, batches, layouts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queueops.actions.decide import (
    MssqlIndex,
    PgIndex,
    Thresholds,
    batch_count,
    layout_problem,
    mssql_caps,
    mssql_index_operation,
    new_watermark,
    next_batch_size,
    pg_index_bloat_pct,
    pg_index_operation,
)

ENTERPRISE_2019 = mssql_caps(3, 15, "Enterprise Edition")
ENTERPRISE_2012 = mssql_caps(3, 11, "Enterprise Edition")
ENTERPRISE_2014 = mssql_caps(3, 12, "Enterprise Edition")
STANDARD_2019 = mssql_caps(2, 15, "Standard Edition")
AZURE_SQL_DB = mssql_caps(5, 12, "SQL Azure")


def ix(frag: float | None, pages: int = 5000, **kw: object) -> MssqlIndex:
    return MssqlIndex(name="IX_Pending", index_id=2, type_desc=str(kw.pop("type_desc", "NONCLUSTERED")), pages=pages,
                      fragmentation_pct=frag, **kw)  # type: ignore[arg-type]


def test_caps_follow_editions_and_versions() -> None:
    assert (ENTERPRISE_2019.online, ENTERPRISE_2019.wait_at_low_priority, ENTERPRISE_2019.resumable) == (True, True, True)
    assert (ENTERPRISE_2014.wait_at_low_priority, ENTERPRISE_2014.resumable) == (True, False)
    assert (ENTERPRISE_2012.online, ENTERPRISE_2012.wait_at_low_priority) == (True, False)
    assert not STANDARD_2019.online and not STANDARD_2019.resumable
    assert AZURE_SQL_DB.online and AZURE_SQL_DB.resumable  # cloud: whatever ProductMajorVersion says
    assert mssql_caps(8, None).online  # Managed Instance


@pytest.mark.parametrize(("frag", "pages", "expected"), [
    (4.99, 5000, "none"),
    (5.0, 5000, "reorganize"),
    (29.99, 5000, "reorganize"),
    (30.0, 5000, "rebuild_online_low_priority"),
    (95.0, 5000, "rebuild_online_low_priority"),
    (95.0, 999, "none"),
    (95.0, 1000, "rebuild_online_low_priority"),
])
def test_reference_thresholds_5_30_percent_and_1000_pages(frag: float, pages: int, expected: str) -> None:
    assert mssql_index_operation(ix(frag, pages), ENTERPRISE_2019).operation == expected


def test_each_decision_says_why() -> None:
    d = mssql_index_operation(ix(12.0), ENTERPRISE_2019)
    assert "12.0 %" in d.reason and "REORGANIZE" in d.reason
    assert "too small" in mssql_index_operation(ix(50.0, 10), ENTERPRISE_2019).reason


def test_offline_rebuild_is_never_chosen_silently() -> None:
    # Standard edition, 80 %: a rebuild is due but ONLINE is impossible.
    d = mssql_index_operation(ix(80.0), STANDARD_2019)
    assert d.operation == "reorganize" and not d.offline
    assert "--allow-offline" in d.reason and "ONLINE is impossible" in d.reason
    # With page locks off, REORGANIZE is impossible too: nothing, and it says so.
    d = mssql_index_operation(ix(80.0, allow_page_locks=False), STANDARD_2019)
    assert d.operation == "none" and "--allow-offline" in d.reason
    # Only the explicit permission chooses it, and the reason says OFFLINE.
    d = mssql_index_operation(ix(80.0), STANDARD_2019, allow_offline=True)
    assert d.operation == "rebuild_offline" and d.offline and "OFFLINE" in d.reason
    # Where online works, allow_offline changes nothing.
    assert not mssql_index_operation(ix(80.0), ENTERPRISE_2019, allow_offline=True).offline


@pytest.mark.parametrize(("frag", "caps", "offline_ok", "expected"), [
    (50.0, ENTERPRISE_2012, False, "rebuild_online"),  # no WAIT_AT_LOW_PRIORITY before 2014
    (50.0, STANDARD_2019, True, "rebuild_offline"),
    (10.0, STANDARD_2019, False, "reorganize"),  # REORGANIZE is online in every edition
])
def test_versions_and_editions(frag: float, caps: object, offline_ok: bool, expected: str) -> None:
    assert mssql_index_operation(ix(frag), caps, allow_offline=offline_ok).operation == expected  # type: ignore[arg-type]


def test_resumable_only_when_asked_and_available() -> None:
    assert mssql_index_operation(ix(50.0), ENTERPRISE_2019, resumable=True).operation == "rebuild_resumable"
    # 2014 has no RESUMABLE: the low-priority online rebuild instead.
    assert mssql_index_operation(ix(50.0), ENTERPRISE_2014, resumable=True).operation == "rebuild_online_low_priority"


def test_what_is_never_rebuilt_online() -> None:
    assert mssql_index_operation(ix(50.0, type_desc="XML"), ENTERPRISE_2019).operation == "reorganize"
    lob = ix(50.0, type_desc="CLUSTERED", legacy_lob=True)
    assert mssql_index_operation(lob, ENTERPRISE_2019).operation == "reorganize"
    assert mssql_index_operation(lob, ENTERPRISE_2019, allow_offline=True).operation == "rebuild_offline"
    # A nonclustered index of a table with text columns is fine online.
    assert mssql_index_operation(ix(50.0, legacy_lob=True), ENTERPRISE_2019).operation == "rebuild_online_low_priority"


def test_page_locks_off_makes_reorganize_a_rebuild() -> None:
    d = mssql_index_operation(ix(10.0, allow_page_locks=False), ENTERPRISE_2019)
    assert d.operation == "rebuild_online_low_priority" and "ALLOW_PAGE_LOCKS" in d.reason


def test_disabled_and_unknown_are_left_alone_and_forced_skips_size_checks() -> None:
    assert mssql_index_operation(ix(90.0, disabled=True), ENTERPRISE_2019).operation == "none"
    assert mssql_index_operation(ix(None), ENTERPRISE_2019).operation == "none"
    assert mssql_index_operation(ix(1.0, pages=3), ENTERPRISE_2019, forced=True).operation == "reorganize"
    assert mssql_index_operation(ix(40.0, pages=3), ENTERPRISE_2019, forced=True).operation.startswith("rebuild")


def test_custom_thresholds() -> None:
    t = Thresholds(reorganize_pct=10, rebuild_pct=20, min_pages=0)
    assert mssql_index_operation(ix(9.0, 1), ENTERPRISE_2019, t).operation == "none"
    assert mssql_index_operation(ix(15.0, 1), ENTERPRISE_2019, t).operation == "reorganize"
    assert mssql_index_operation(ix(20.0, 1), ENTERPRISE_2019, t).operation == "rebuild_online_low_priority"


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def test_pg_bloat_counts_empty_and_deleted_pages() -> None:
    # A fresh index: 1000 leaf pages at 90 % (the fillfactor) in 1010 pages + metapage -> ~1 %.
    assert pg_index_bloat_pct(1011 * 8192, 1000, 90.0) < 2
    # Half the pages are empty/deleted after churn, the rest well filled: ~50 % waste.
    assert 45 <= pg_index_bloat_pct(2001 * 8192, 1000, 90.0) <= 55
    # Density alone would miss it: the same figure with density 45 % and every page a leaf.
    assert 45 <= pg_index_bloat_pct(1001 * 8192, 1000, 45.0) <= 55
    # Only the metapage (a partial index rebuilt while no row matches it): nothing to reclaim.
    assert pg_index_bloat_pct(8192, 0, float("nan")) == 0.0
    # One leaf page a few entries use (the lab's ready index after churn): a rebuild writes the same
    # metapage and one leaf, so nothing is reclaimable however empty the leaf looks.
    assert pg_index_bloat_pct(2 * 8192, 1, 0.3) == 0.0
    assert pg_index_bloat_pct(3 * 8192, 2, 0.3) == 50.0
    # A leaf with no entry left: a fresh build is the metapage alone.
    assert pg_index_bloat_pct(2 * 8192, 1, 0.0) == 100.0
    # Pages but no leaf density to read: unknown, not zero.
    assert pg_index_bloat_pct(2 * 8192, 0, float("nan")) is None


def pgix(frag: float | None, pages: int = 5000, **kw: object) -> PgIndex:
    return PgIndex(name="q_pkey", method=str(kw.pop("method", "btree")), pages=pages, bloat_pct=frag, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("frag", "pages", "expected"), [
    (4.9, 5000, "none"), (20.0, 5000, "none"), (30.0, 5000, "reindex_concurrently"), (90.0, 999, "none"),
])
def test_pg_thresholds(frag: float, pages: int, expected: str) -> None:
    assert pg_index_operation(pgix(frag, pages)).operation == expected


def test_pg_uses_the_worse_of_bloat_and_leaf_fragmentation() -> None:
    assert pgix(3.0, leaf_fragmentation_pct=45.0).fragmentation_pct == 45.0
    assert pg_index_operation(pgix(3.0, leaf_fragmentation_pct=45.0)).operation == "reindex_concurrently"


def test_pg_offline_reindex_only_when_allowed_and_needed() -> None:
    d = pg_index_operation(pgix(60.0), concurrently=False)
    assert d.operation == "none" and "--allow-offline" in d.reason
    d = pg_index_operation(pgix(60.0), concurrently=False, allow_offline=True)
    assert d.operation == "reindex_offline" and d.offline
    assert pg_index_operation(pgix(60.0), allow_offline=True).operation == "reindex_concurrently"


def test_pg_leftovers_unknown_and_forced() -> None:
    assert pg_index_operation(pgix(None, valid=False, leftover=True)).operation == "drop_leftover"
    assert pg_index_operation(pgix(None, valid=False)).operation == "none"
    d = pg_index_operation(pgix(None))
    assert d.operation == "none" and "unknown" in d.reason
    assert pg_index_operation(pgix(None, pages=1), forced=True).operation == "reindex_concurrently"
    assert pg_index_operation(pgix(None, method="gin")).operation == "none"


# ---------------------------------------------------------------------------------------------
# Watermark, batches, layout


def test_new_watermark() -> None:
    assert new_watermark(None, 50) == 0  # empty queue
    assert new_watermark(1000, 0) == 1000
    assert new_watermark(1000, 50) == 950


@given(st.integers(min_value=-10**15, max_value=10**15), st.integers(min_value=0, max_value=10**6))
def test_new_watermark_never_strands_a_pending_item(lowest: int, buffer: int) -> None:
    w = new_watermark(lowest, buffer)
    assert w <= lowest and lowest - w == buffer  # drift after the reset is exactly the buffer, >= 0


@given(st.integers(min_value=0, max_value=20_000), st.integers(min_value=1, max_value=1000),
       st.one_of(st.none(), st.integers(min_value=1, max_value=30_000)))
def test_batches_cover_exactly_the_capped_rows(rows: int, size: int, cap: int | None) -> None:
    done, batches = 0, 0
    target = rows if cap is None else min(rows, cap)
    while True:
        n = min(next_batch_size(size, done, cap), target - done)
        if n <= 0:
            break
        done += n
        batches += 1
    assert done == target
    assert batches == batch_count(target, size)


def test_layout_problems() -> None:
    cols = [("id", "bigint"), ("status", "smallint")]
    assert layout_problem(cols, cols) is None
    assert "does not exist" in layout_problem(cols, [])
    assert "has 1 columns" in layout_problem(cols, cols[:1])
    assert "column 2" in layout_problem(cols, [("id", "bigint"), ("status", "text")])
    assert "identity" in layout_problem(cols, cols, ["id"])


def test_pg_bloat_discounts_entries_of_dead_rows() -> None:
    # Before a vacuum the leaf pages are full of entries of deleted rows: 90 % of rows dead.
    assert pg_index_bloat_pct(1011 * 8192, 1000, 90.0, live_fraction=0.1) >= 85
    assert pg_index_bloat_pct(1011 * 8192, 1000, 90.0, live_fraction=1.0) < 2
