"""Files from results: staged folders, tables, figures, the report, and reading a run back."""
