"""Store tables (SQLAlchemy Core). Shared by the service (writes snapshots, status, alerts), the
actions (audit log) and the console (reads everything).

The audit log follows the shape of Ola Hallengren's CommandLog: the command, its start, its end,
its outcome and its error, plus who ran it, with what role, on which queue, and the preview it
was confirmed against. A row is inserted *before* the action starts (outcome ``running``) and
completed after, so an action interrupted by a crash stays visible as ``running`` until
:func:`queueops.actions` marks it ``interrupted``.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# Snapshot and status ids grow by millions a day (100 queues at 15 s: ~5M rows/day): 64-bit on
# PostgreSQL, where a plain Integer would run out after 2^31 rows. SQLite's rowid is 64-bit
# already and autoincrements only for a column typed exactly INTEGER.
RowId = BigInteger().with_variant(Integer(), "sqlite")

snapshots = Table(
    "snapshots", metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("target", String(128), nullable=False),
    Column("database", String(256), nullable=False, default=""),
    Column("queue", String(128), nullable=False, default=""),
    Column("metric", String(128), nullable=False),
    Column("value", Float, nullable=True),
    Column("note", Text, nullable=False, default=""),
    Index("ix_snapshots_ts", "ts"),
    Index("ix_snapshots_queue_metric_ts", "target", "queue", "metric", "ts"),
)

collector_status = Table(
    "collector_status", metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("target", String(128), nullable=False),
    Column("collector", String(128), nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("rows", Integer, nullable=False, default=0),
    Column("error", Text, nullable=False, default=""),
    Column("timeout", Boolean, nullable=False, default=False),
    Index("ix_status_ts", "ts"),
    Index("ix_status_target_ts", "target", "collector", "ts"),
)

alert_state = Table(
    "alert_state", metadata,
    Column("rule", String(256), primary_key=True),
    Column("target", String(128), primary_key=True),
    Column("queue", String(128), primary_key=True),
    Column("state", String(16), nullable=False),  # pending | firing | resolved
    Column("since", DateTime(timezone=True), nullable=False),
    Column("value", Float, nullable=True),
    Column("notified_at", DateTime(timezone=True), nullable=True),
    # A firing alert whose condition has been clear since then (hysteresis: resolved after clear_for_s).
    Column("clearing_since", DateTime(timezone=True), nullable=True),
)

# Every alert transition (fired, resolved), kept for the console's history and the noise benchmark:
# alert_state holds only each alert's latest state.
alert_events = Table(
    "alert_events", metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("rule", String(256), nullable=False),
    Column("target", String(128), nullable=False),
    Column("queue", String(128), nullable=False),
    Column("state", String(16), nullable=False),  # firing | resolved
    Column("severity", String(8), nullable=False),
    Column("metric", String(128), nullable=False),
    Column("value", Float, nullable=True),
    Column("active_since", DateTime(timezone=True), nullable=False),
    Column("condition", Text, nullable=False, default=""),
    # The queue's one state after the transition's cycle (queueops.alerts.rules.queue_states: ok,
    # warn, crit), as its notification said it; NULL on transitions recorded before the column.
    Column("queue_state", String(8), nullable=True),
    Index("ix_alert_events_at", "at"),
)

audit_log = Table(
    "audit_log", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("start_time", DateTime(timezone=True), nullable=False),
    Column("end_time", DateTime(timezone=True), nullable=True),
    Column("user_name", String(256), nullable=False),
    Column("role", String(32), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target", String(128), nullable=False),
    Column("queue", String(128), nullable=False),
    Column("command", Text, nullable=False),        # the preview's statements; as run: audit_commands
    Column("params", Text, nullable=False, default="[]"),  # JSON
    Column("preview", Text, nullable=False, default="{}"),  # JSON: what the operator confirmed
    Column("rows_affected", Integer, nullable=True),
    Column("outcome", String(16), nullable=False),  # running | ok | failed | interrupted | refused
    Column("error", Text, nullable=False, default=""),
    # The action's process was last heard of (its start, then each committed batch), and -- for
    # an ``interrupted`` record -- when its death was noticed: it died between the two.
    Column("last_heard", DateTime(timezone=True), nullable=True),
    Column("noticed_at", DateTime(timezone=True), nullable=True),
    Index("ix_audit_start", "start_time"),
)

# One row per statement an action executed (CommandExecute's CommandLog row per command), under
# its audit_log record: written before the statement runs and completed after it, so a killed
# action leaves its last statement open (end_time NULL). ``step`` names the preview step whose
# statement this is ("" for the action's own checks and counts, which the preview does not list).
audit_commands = Table(
    "audit_commands", metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("audit_id", Integer, nullable=False),
    Column("seq", Integer, nullable=False),          # 1, 2, ... within the action
    Column("step", String(256), nullable=False, default=""),
    Column("statement", Text, nullable=False),       # exactly as the server received it
    Column("params", Text, nullable=False, default="[]"),  # JSON
    Column("object", String(512), nullable=False, default=""),
    Column("start_time", DateTime(timezone=True), nullable=False),
    Column("end_time", DateTime(timezone=True), nullable=True),
    Column("rows", Integer, nullable=True),          # rows the statement returned (RETURNING / OUTPUT keys)
    Column("error", Text, nullable=False, default=""),
    Index("ix_audit_commands_audit", "audit_id", "seq"),
)

lake_exports = Table(
    "lake_exports", metadata,
    Column("hour", DateTime(timezone=True), primary_key=True),
    Column("rows", Integer, nullable=False),
    Column("exported_at", DateTime(timezone=True), nullable=False),
    Column("status_rows", Integer, nullable=True),  # collector_status rows of that hour
)

# Small named values the service keeps between runs (e.g. the lake exporter's scan marks).
service_state = Table(
    "service_state", metadata,
    Column("name", String(128), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# The console's server-side sign-in sessions (:mod:`queueops.store.sessions`). The browser's cookie
# holds a random id; only its SHA-256 is stored, so reading the store does not let anyone sign in.
# ``fingerprint`` is the users file entry's digest at sign-in (:func:`queueops.users.fingerprint`):
# a changed password or role, or a removed user, no longer matches and ends the session.
console_sessions = Table(
    "console_sessions", metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("user_name", String(256), nullable=False),
    Column("method", String(16), nullable=False),    # local
    Column("fingerprint", String(64), nullable=False),
    Column("address", String(64), nullable=False, default=""),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),  # absolute limit
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Column("end_reason", String(64), nullable=False, default=""),
    Index("ix_console_sessions_user", "user_name"),
)

# Failed sign-ins per key ("user:NAME" and "addr:ADDRESS"): the console's throttle, shared by its
# processes and kept across restarts.
signin_throttle = Table(
    "signin_throttle", metadata,
    Column("key", String(320), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("last_failure", DateTime(timezone=True), nullable=False),
    Column("locked_until", DateTime(timezone=True), nullable=False),
)

# Every sign-in attempt and sign-out of the console (ok | failed | locked | signed-out), read with
# the audit log (`queueops audit --sign-ins`, the console's Audit page).
signin_log = Table(
    "signin_log", metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("user_name", String(256), nullable=False),
    Column("address", String(64), nullable=False, default=""),
    Column("outcome", String(16), nullable=False),
    Column("detail", Text, nullable=False, default=""),
    Index("ix_signin_log_ts", "ts"),
)
