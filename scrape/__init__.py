"""Extraction: pure extractors over stored responses, the extract stage service and task."""
