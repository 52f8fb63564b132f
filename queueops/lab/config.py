"""The lab's own config file (``.queueops/lab.toml``): one target, the five lab queues.

Short lease timeout and thresholds (tens of seconds) so that every fault shows within a minute.

The oldest-age warning (30 s) sits above the calm workload's own crests, not on them: the
production wave (``produce_per_s`` 4 +- 80 % over 120 s against consumers taking 5/s,
queueops/lab/settings.py) builds a backlog of about 68 items at each crest, which the consumers
take about 14 s to reach, and Poisson arrivals add a few seconds more (14-23 s measured at the
crests, benchmarks/alert_noise.py). At 20 s the warning fired on the calm lab about once per five
minutes: the line, not the hold, was wrong. A fault that stops the consumers (lock-hold) crosses
30 s within half a minute.

The password is a ``file:`` reference to the generated secret next to the config, never a literal.
"""

from __future__ import annotations

from pathlib import Path

LAB_TOML = """\
# Written by 'queueops lab start'. The lab's PostgreSQL listens on 127.0.0.1:{port}.
[store]
url = "sqlite:///{state_dir}/store.db"

[lake]
path = "{state_dir}/lake"
# Closed hours reach the lake within 5 minutes of closing, and the Spark pipeline follows.
export_every_s = 300

[pipeline]
out = "{state_dir}/gold"
after_export = true

[report]
path = "{state_dir}/report.html"

[schedule]
fast_s = 5
slow_s = 30

[identity]
default_role = "operator"

[console]
users_file = "{state_dir}/users.toml"

[[targets]]
name = "lab"
dialect = "postgresql"
url = "{url}"
password = "file:lab.secret"
statement_timeout_ms = 3000
lock_timeout_ms = 500

[[queues]]
name = "delete"
target = "lab"
kind = "delete"
schema = "lab"
table = "q_delete"
key = "id"
enqueued_at = "enqueued_at"
lease_timeout_s = 30
watermark = {{ table = "q_delete_watermark", column = "low_key", buffer = 0 }}
thresholds = {{ oldest_age_s = {{ warn = 30, crit = 60 }}, depth = {{ warn = 2000, crit = 20000 }} }}

[[queues]]
name = "status"
target = "lab"
kind = "status"
schema = "lab"
table = "q_status_meta"
data_table = "q_status_data"
data_key = "id"
key = "id"
enqueued_at = "enqueued_at"
status_column = "status"
status_changed_at = "status_changed_at"
attempts_column = "attempts"
ready_values = [0]
processing_values = [1]
done_values = [2]
lease_timeout_s = 30
# Dead tuples scaled to the lab's table (a few hundred rows; tens of dead tuples under the plain
# workload, a few thousand under the churn fault, which this queue takes).
thresholds = {{ oldest_age_s = {{ warn = 30, crit = 60 }}, depth = {{ warn = 2000, crit = 20000 }}, ghost_records = {{ warn = 500, crit = 20000 }} }}

[[queues]]
name = "lease"
target = "lab"
kind = "lease"
schema = "lab"
table = "q_lease"
key = "id"
enqueued_at = "created_at"
lease_column = "processing_started_at"
error_column = "errors"
attempts_column = "attempts"
lease_timeout_s = 20
thresholds = {{ oldest_age_s = {{ warn = 30, crit = 60 }}, depth = {{ warn = 2000, crit = 20000 }} }}

[[queues]]
name = "due"
target = "lab"
kind = "due"
schema = "lab"
table = "q_due"
key = "id"
enqueued_at = "enqueued_at"
due_column = "due_at"
thresholds = {{ oldest_age_s = {{ warn = 30, crit = 60 }}, depth = {{ warn = 2000, crit = 20000 }} }}

[[queues]]
name = "ring"
target = "lab"
kind = "ring"
schema = "lab"
table = "q_ring_slot"
key = "slot"
enqueued_at = "enqueued_at"
sequence_table = "q_ring_seq"
push_column = "push_seq"
pop_column = "pop_seq"
refcount_column = "reference_count"
capacity = 1024
thresholds = {{ oldest_age_s = {{ warn = 30, crit = 60 }}, depth = {{ warn = 700, crit = 1000 }} }}
"""


def write_lab_config(state_dir: Path, url: str, port: int) -> Path:
    path = Path(state_dir) / "lab.toml"
    path.write_text(LAB_TOML.format(port=port, url=url, state_dir=Path(state_dir).resolve()))
    return path
