"""Files a batch writes: records, feedback, reports, figures, the summary table, progress."""
