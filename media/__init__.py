"""Media: assets referenced by pages, downloaded into content-addressed storage."""
