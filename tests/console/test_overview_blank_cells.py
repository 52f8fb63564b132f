"""Not-applicable cells on the Overview are empty, never the word "None" (nor "nan").

Checked on what Streamlit sends to the browser: the table's placeholder for missing values (the
browser draws its own "None" when there is none) and the Styler's display values.
"""

from __future__ import annotations

import io

import pyarrow as pa

from tests.console.conftest import ConsoleEnv, page, stuck_leases


def _arrow(data: bytes) -> object:
    return pa.ipc.open_stream(io.BytesIO(data)).read_all().to_pandas()


def test_not_applicable_cells_are_empty(env: ConsoleEnv) -> None:
    stuck_leases(env, 2)
    at = page("console.views.overview")
    assert not at.exception
    proto = at.dataframe[0].proto
    data = _arrow(proto.arrow_data.data)
    # A ring or delete queue has no leases: its "Stuck leases" cell is a missing value.
    ring = data.index[data["Queue"] == "ring"][0]
    assert data.loc[ring, "Stuck leases"] != data.loc[ring, "Stuck leases"]  # NaN: not applicable
    assert proto.HasField("placeholder") and proto.placeholder == ""
    shown = _arrow(proto.arrow_data.styler.display_values)
    words = {str(v).strip().lower() for col in shown.columns for v in shown[col]}
    assert not words & {"none", "nan", "null"}, words
    assert shown.loc[ring, "Stuck leases"] == ""
