"""The Streamlit console (``queueops serve``)."""
