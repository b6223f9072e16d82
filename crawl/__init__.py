"""Projects, seeds, the frontier (page rows with leases) and fetching."""
