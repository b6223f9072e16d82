"""The host policy every stage shares: politeness slots, robots.txt, where secrets may go, one claim
of a stage's hosts and one recorder of what they answered."""
