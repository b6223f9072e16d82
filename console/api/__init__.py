"""The REST API: projects, seeds, pages, items, assets, failures, actions and streaming exports."""
