"""Everything that computes. Pure Python / numpy / torch; never imports streamlit or plotly."""
