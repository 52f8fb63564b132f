"""sql/postgresql/fragments/tree.sql, the one place a table's partitions are found, and the include
that puts it into every statement that needs them (queueops/sqlfiles.py)."""

from __future__ import annotations

import pytest

from queueops import sqlfiles


def _code(text: str) -> str:
    """``text`` without its comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def test_no_statement_finds_partitions_with_pg_partition_tree() -> None:
    """pg_partition_tree locks every partition (find_all_inheritors): a statement that reads only
    the catalogue waited behind a VACUUM FULL of one partition. Every file includes tree.sql."""
    users = []
    for name, text in sqlfiles.all_files("postgresql"):
        assert "pg_partition_tree" not in _code(text), name
        if "{{tree." in _code(text):
            users.append(name)
            for block, body in sqlfiles.load("postgresql", name[:-4]).blocks.items():
                assert "{{" not in body, (name, block)
    assert len(users) >= 10, users


def test_an_include_expands_on_code_lines_only_and_an_unknown_block_is_refused() -> None:
    text = "SELECT {{tree.leaves(c.oid)}} AS rels\n-- {{tree.leaves(x)}} stays a comment"
    out = sqlfiles._included("postgresql", text)
    first, second = out.split("\n")
    assert "pg_inherits" in first and "(c.oid)::oid" in first and "--" not in first
    assert second == "-- {{tree.leaves(x)}} stays a comment"
    with pytest.raises(sqlfiles.MissingFragment):
        sqlfiles._included("postgresql", "SELECT {{tree.nothing(c.oid)}}")


def test_leaves_and_relations_equal_the_servers_own_partition_tree(lab) -> None:  # noqa: ANN001
    """Two levels of partitions, an empty partitioned partition and a plain table: the leaves are
    pg_partition_tree's, and the relations are the whole tree."""
    leaves = sqlfiles._included("postgresql", "SELECT {{tree.leaves(to_regclass(%s))}}")
    relations = sqlfiles._included("postgresql", "SELECT {{tree.relations(to_regclass(%s))}}")
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.tree_root, lab.tree_plain")
        conn.execute("CREATE TABLE lab.tree_root (k text NOT NULL, id bigint NOT NULL) PARTITION BY LIST (k)")
        conn.execute("CREATE TABLE lab.tree_a PARTITION OF lab.tree_root FOR VALUES IN ('a')")
        conn.execute("CREATE TABLE lab.tree_b PARTITION OF lab.tree_root FOR VALUES IN ('b') PARTITION BY RANGE (id)")
        conn.execute("CREATE TABLE lab.tree_b1 PARTITION OF lab.tree_b FOR VALUES FROM (0) TO (10)")
        conn.execute("CREATE TABLE lab.tree_b2 PARTITION OF lab.tree_b FOR VALUES FROM (10) TO (20)")
        conn.execute("CREATE TABLE lab.tree_c PARTITION OF lab.tree_root FOR VALUES IN ('c') PARTITION BY RANGE (id)")
        conn.execute("CREATE TABLE lab.tree_plain (id bigint)")
        try:
            def names(query: str, table: str) -> list[str]:
                # The project's own fragment, expanded; the table is bound.
                row = conn.execute(f"SELECT ARRAY(SELECT x::regclass::text FROM unnest(({query})) AS x ORDER BY 1)",  # noqa: S608
                                   (table,)).fetchone()
                return list(row[0]) if row else []

            truth = [r[0] for r in conn.execute(
                "SELECT relid::regclass::text FROM pg_partition_tree('lab.tree_root') WHERE isleaf ORDER BY 1")]
            assert names(leaves, "lab.tree_root") == truth == ["lab.tree_a", "lab.tree_b1", "lab.tree_b2"]
            assert names(relations, "lab.tree_root") == sorted(
                ["lab.tree_root", "lab.tree_a", "lab.tree_b", "lab.tree_b1", "lab.tree_b2", "lab.tree_c"])
            assert names(leaves, "lab.tree_b") == ["lab.tree_b1", "lab.tree_b2"]
            assert names(leaves, "lab.tree_plain") == names(relations, "lab.tree_plain") == ["lab.tree_plain"]
            assert conn.execute(f"SELECT ({leaves}) IS NULL", ("lab.tree_c",)).fetchone() == (True,)
            assert conn.execute(f"SELECT ({leaves}) IS NULL, ({relations}) IS NULL",
                                ("lab.no_such_table", "lab.no_such_table")).fetchone() == (True, True)
        finally:
            conn.execute("DROP TABLE lab.tree_root, lab.tree_plain")
