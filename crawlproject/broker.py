"""kombu's Redis transport, hardened against one crash when the broker goes away.

When Redis restarts or dies, the worker's consumer closes its channel, and kombu then tries to
put the unacknowledged messages back through a connection that is already gone: an
AttributeError ('NoneType' object has no attribute 'hostname') escapes, and Celery stops the
whole worker as an "unrecoverable error" instead of reconnecting. A task that finishes after the
reconnect and acks on its old channel crashes it the same way. Here both are skipped with a
warning: the messages stay in Redis's unacked hash (kombu restores them after the visibility
timeout), and the database's leases and the reaper bring the work back sooner anyway.
"""

import logging

from kombu.transport import TRANSPORT_ALIASES, redis

log = logging.getLogger("crawlhub.broker")


class QoS(redis.QoS):
    def restore_unacked(self, client=None):
        try:
            return super().restore_unacked(client)
        except AttributeError as exc:
            self._delivered.clear()
            log.warning("broker connection gone; unacked messages are left for redelivery (%s)", exc)

    def ack(self, delivery_tag):
        """A task that finished after the reconnect acks on its old, closed channel: the message
        stays unacked in Redis and comes back once (a no-op: claims are compare-and-set)."""
        try:
            return super().ack(delivery_tag)
        except AttributeError as exc:
            self._delivered.pop(delivery_tag, None)
            log.warning("ack after the broker connection was lost; the message may come back (%s)", exc)

    def reject(self, delivery_tag, requeue=False):
        try:
            return super().reject(delivery_tag, requeue=requeue)
        except AttributeError as exc:
            self._delivered.pop(delivery_tag, None)
            log.warning("reject after the broker connection was lost; the message may come back (%s)", exc)


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel


def install() -> None:
    """Make redis:// URLs use this transport. An alias, not the broker_transport setting, so the
    broker URL keeps its redis:// scheme for everything that reads it (Flower's queue lengths)."""
    TRANSPORT_ALIASES["redis"] = f"{__name__}:Transport"
