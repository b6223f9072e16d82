"""kombu's transports, hardened: Redis against one crash when the broker goes away, the embedded
filesystem broker against a message read while it is being written.

Redis:

When Redis restarts or dies, the worker's consumer closes its channel, and kombu then tries to
put the unacknowledged messages back through a connection that is already gone: an
AttributeError ('NoneType' object has no attribute 'hostname') escapes, and Celery stops the
whole worker as an "unrecoverable error" instead of reconnecting. A task that finishes after the
reconnect and acks on its old channel crashes it the same way. Here both are skipped with a
warning: the messages stay in Redis's unacked hash (kombu restores them after the visibility
timeout), and the database's leases and the reaper bring the work back sooner anyway.
"""

import logging
import os
import time
import uuid

from celery.worker import state as worker_state
from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, redis
from kombu.transport.virtual import Empty
from kombu.utils.json import dumps

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


class FilesystemChannel(filesystem.Channel):
    """kombu writes a message file in place (create, then write), and a consumer that lists the
    folder between the two takes the empty file: JSONDecodeError, an "unrecoverable error" that
    stopped the embedded worker, and the message lost until the reaper republished its work (a
    bench crawl waited 300 s on it). Here the message is written under a name no consumer reads
    (it does not end in ".<queue>.msg"), then renamed into place: a rename is atomic, so a
    consumer sees the whole message or none."""

    def _put(self, queue, payload, **kwargs):
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"
        try:
            with open(partial, "wb", buffering=0) as f:
                f.write(dumps(payload).encode())
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue):
        try:
            return super()._get(queue)
        except Empty:
            self._sweep_parts()
            raise

    _swept_at = 0.0

    def _sweep_parts(self, every: float = 60.0) -> None:
        """A publisher killed between the write and the rename leaves its ".part" file (its work is
        republished by the reaper from the rows): removed once it is a minute old."""
        now = time.time()
        if now - FilesystemChannel._swept_at < every:
            return
        FilesystemChannel._swept_at = now
        for entry in os.scandir(self.data_folder_in):
            try:
                if entry.name.endswith(".part") and now - entry.stat().st_mtime > every:
                    os.remove(entry.path)
            except OSError:  # renamed or removed meanwhile
                continue


IDLE_AFTER_SECONDS = 2.0  # no message for this long: the consumer is idle
IDLE_POLLING_INTERVAL = 0.5  # how often an idle consumer looks (a busy one: the polling_interval option)


class FilesystemTransport(filesystem.Transport):
    """Polls fast while messages come (the stages hand work to each other within milliseconds) and
    slowly once none came for IDLE_AFTER_SECONDS: an idle `make serve` worker lists its folder
    twice a second instead of a hundred times, and the first message after a pause waits at most
    IDLE_POLLING_INTERVAL."""

    Channel = FilesystemChannel
    _last_message = float("-inf")

    def drain_events(self, connection, timeout=None):
        started = time.monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)
            except Empty:
                now = time.monotonic()
                if (timeout is not None and now - started >= timeout) or _worker_stopping():
                    raise TimeoutError() from None  # socket.timeout, as kombu raises
                time.sleep(self.poll_interval(now, timeout=None if timeout is None else timeout - (now - started)))
            else:
                self._last_message = time.monotonic()
                return

    def poll_interval(self, now: float, *, timeout: float | None = None) -> float:
        """The sleep before the next look: short while busy, IDLE_POLLING_INTERVAL once idle, never
        past the caller's timeout."""
        busy = now - self._last_message < IDLE_AFTER_SECONDS
        interval = (self.polling_interval or 0.0) if busy else max(IDLE_POLLING_INTERVAL, self.polling_interval or 0.0)
        return max(0.0, min(interval, timeout)) if timeout is not None else interval


def _worker_stopping() -> bool:
    """A worker asked to stop (SIGTERM, Ctrl-C): its consumer loop looks for that flag only between
    two calls of drain_events, so an empty wait ends at once instead of at its timeout."""
    return worker_state.should_stop is not None or worker_state.should_terminate is not None


def install() -> None:
    """Make redis:// and filesystem:// URLs use these transports. Aliases, not the broker_transport
    setting, so the broker URL keeps its scheme for everything that reads it (Flower's queue
    lengths)."""
    TRANSPORT_ALIASES["redis"] = f"{__name__}:Transport"
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:FilesystemTransport"
