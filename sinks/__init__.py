"""Result sinks: where a project's items (and optionally pages and assets) are delivered as they are
stored. A transactional outbox (SinkDelivery rows written with the items) and leased delivery
batches make delivery at least once; a stable key per record lets every sink recognise a record it
already has, so a redelivery after a crash writes nothing twice."""
