"""The history wing: `hpcnet history` (the series read: stored_series; judged:
history; from the metrics index: history_index; as text: history_text),
levels and change points (levels, binseg, pooled_outliers), the metrics
index (metricindex) and the trend page (trend).  The last wing: it may import
the references, comparison and report wings (the trend page is drawn with
the report's parts).
"""
