"""Tests of reports and statistics: summaries, tables, agreement, correlations, benchmark reports, the run viewer."""
