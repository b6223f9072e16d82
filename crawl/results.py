"""Stored results, announced to whoever delivers them (the sinks app subscribes in sinks/apps.py).

The stages announce inside the transaction that stores what they announce, so a subscriber's own
writes (the sinks' outbox rows) commit or roll back with it; they import nothing of the subscriber.
"""

from django.dispatch import Signal

# sender: the Project; results: the extract stage's results of pages it just stored; clean: makes a
# value storable in JSONB.
pages_extracted = Signal()

# sender: the project's id; assets: MediaAsset rows just stored (their fields as stored).
assets_stored = Signal()
