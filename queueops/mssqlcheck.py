"""What ``config check --live`` says of a SQL Server target and its logins (issue 33, items 7 and 8):
the version (SQL Server 2016, 13.x, is the minimum), the edition (online index operations), the
database's compatibility level and row versioning, and every permission the collectors and actions
need, each missing one named with the metrics and actions it disables and the statement that grants
it, for SQL Server, Azure SQL Managed Instance and Azure SQL Database alike.

Pure functions over the rows of ``sql/mssql/server_check.sql``: the live check runs the statements.

Why this matters: without VIEW SERVER STATE, ``sys.dm_exec_requests`` and ``sys.dm_exec_sessions``
show only the login's own sessions, so blocking chains, lock waiters, the oldest snapshot and
terminate's candidates read "nothing" instead of failing -- a silent zero; without VIEW DATABASE
STATE, ``sys.dm_db_partition_stats`` fails depth (its estimate above the cap) and the page-reading
collectors fail outright.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from queueops.config import Queue
from queueops.finding import Finding
from queueops.identifiers import quote_ident

MIN_MAJOR = 13  # SQL Server 2016: DATEDIFF_BIG, STRING_ESCAPE, FOR JSON
EDITIONS = {1: "Personal / Desktop", 2: "Standard", 3: "Enterprise / Developer / Evaluation", 4: "Express",
            5: "Azure SQL Database", 6: "Azure Synapse", 8: "Azure SQL Managed Instance", 9: "Azure SQL Edge"}
AZURE_DB = 5


def platform(server: Mapping[str, Any]) -> str:
    edition = server.get("engine_edition")
    return "Azure SQL Database" if edition == AZURE_DB else "Azure SQL Managed Instance" if edition == 8 \
        else "SQL Server"


def online_index(server: Mapping[str, Any]) -> bool:
    """Online index operations: EngineEdition 3 (Enterprise, Developer, Evaluation), 5 and 8."""
    return server.get("engine_edition") in (3, 5, 8)


def describe(target: str, server: Mapping[str, Any], who: str) -> str:
    """A details line: what the server is and what that means here."""
    edition = server.get("engine_edition")
    rcsi = "on" if server.get("is_read_committed_snapshot_on") else "off"
    return (f"  target {target!r} ({who} login {server.get('login_name')!r}): {platform(server)} "
            f"{server.get('product_version')} ({server.get('edition')}, EngineEdition {edition}: "
            f"{EDITIONS.get(edition, 'unknown')}), database {server.get('database_name')!r} at compatibility "
            f"level {server.get('compatibility_level')}, READ_COMMITTED_SNAPSHOT {rcsi}; online index "
            f"operations {'yes' if online_index(server) else 'no: CREATE INDEX and rebuilds are offline'}")


def version_checks(server: Mapping[str, Any]) -> list[Finding]:
    major = server.get("major_version")
    if server.get("engine_edition") in (5, 8) or major is None or int(major) >= MIN_MAJOR:
        return []
    return [Finding("error", None, "server version", str(server.get("product_version")),
                  f"SQL Server 2016 (13.x) is the minimum: the collectors use DATEDIFF_BIG, STRING_ESCAPE and "
                  f"FOR JSON, which this server (major version {major}) does not have: every fast collector fails",
                  "upgrade the server, or do not monitor it with queueops")]


def _grant(perm: str, server: Mapping[str, Any], principal: str) -> str:
    """The statement that grants ``perm`` on this platform."""
    user = quote_ident(str(server.get("user_name") or principal), "mssql")
    login = quote_ident(str(server.get("login_name") or principal), "mssql")
    if perm == "VIEW SERVER STATE":
        return (f"USE master; GRANT VIEW SERVER STATE TO {login}" if server.get("engine_edition") != AZURE_DB
                else f"GRANT VIEW DATABASE STATE TO {user} (Azure SQL Database: no server-level GRANT; or, in "
                     f"master, ALTER SERVER ROLE ##MS_ServerStateReader## ADD MEMBER {login})")
    if perm == "KILL":
        return (f"USE master; GRANT ALTER ANY CONNECTION TO {login}" if server.get("engine_edition") != AZURE_DB
                else f"GRANT KILL DATABASE CONNECTION TO {user}")
    return f"GRANT {perm} TO {user}"


def server_checks(server: Mapping[str, Any], *, action: bool) -> list[Finding]:
    """The missing server and database permissions of one login (``action``: the action login)."""
    who = "action" if action else "collector"
    login = str(server.get("login_name") or "")
    out: list[Finding] = []
    azure_db = server.get("engine_edition") == AZURE_DB
    # On Azure SQL Database the DMVs need VIEW DATABASE STATE; elsewhere VIEW SERVER STATE.
    sees_all = server.get("view_database_state") if azure_db else server.get("view_server_state")
    if sees_all == 0:
        what = ("act terminate finds no candidate (it sees only its own session) and rebuild shows no "
                "progress" if action else
                "blocking_chains, lock_waits' lock_waiters, oldest_snapshot and lock_timeouts see only this "
                "login's own sessions and report nothing: a silent zero, not an error")
        out.append(Finding("warning" if action else "error", None, f"{who} login", login,
                         f"lacks VIEW SERVER STATE{' (Azure SQL Database: VIEW DATABASE STATE)' if azure_db else ''}: "
                         + what, _grant("VIEW SERVER STATE", server, login)))
    if not azure_db and server.get("view_database_state") == 0 and not action:
        out.append(Finding("error", None, f"{who} login", login,
                         "lacks VIEW DATABASE STATE: depth (sys.dm_db_partition_stats), ghost_records, "
                         "fragmentation_pct (sys.dm_db_index_physical_stats) and lock_waits' per-table totals "
                         "(sys.dm_db_index_operational_stats) fail on every cycle",
                         _grant("VIEW DATABASE STATE", server, login)))
    if action:
        kill = server.get("kill_database_connection") if azure_db else server.get("alter_any_connection")
        if kill == 0:
            out.append(Finding("warning", None, "action login", login,
                             "lacks the right to KILL: act terminate fails",
                             _grant("KILL", server, login)))
        if not azure_db and server.get("view_database_state") == 0:
            out.append(Finding("warning", None, "action login", login,
                             "lacks VIEW DATABASE STATE: act rebuild cannot read its indexes' fragmentation",
                             _grant("VIEW DATABASE STATE", server, login)))
    return out


def table_checks(q: Queue, rights: Mapping[str, Any], server: Mapping[str, Any], *, action: bool,
                 table: str) -> list[Finding]:
    """The missing rights of one login on one queue table (NULL rights: no such table, told elsewhere)."""
    login = str(server.get("login_name") or "")
    out: list[Finding] = []
    if not action:
        if rights.get("can_select") == 0:
            out.append(Finding("error", q.name, "table", q.table,
                             f"the collector login {login!r} lacks SELECT on {table}: every collector of this queue "
                             "fails (depth, oldest_age_s, stuck_leases, ...)", _grant(f"SELECT ON {table}", server, login)))
        return out
    needs: Sequence[tuple[str, str, str]] = []
    if q.kind in ("lease", "status"):
        needs = [*needs, ("can_update", "UPDATE", "requeue")]
    if q.kind == "status":
        needs = [*needs, ("can_delete", "DELETE", "archive"), ("can_insert", "INSERT", "archive --mode move (the "
                                                                                      "archive table needs it)")]
    needs = [*needs, ("can_alter", "ALTER", "rebuild (ALTER INDEX)"), ("can_select", "SELECT", "every preview")]
    for key, perm, what in needs:
        if rights.get(key) == 0:
            out.append(Finding("warning", q.name, "table", q.table,
                             f"the action login {login!r} lacks {perm} on {table}: {what} fails",
                             _grant(f"{perm} ON {table}", server, login)))
    return out
