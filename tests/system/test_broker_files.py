"""The embedded filesystem broker: a message is never seen half-written, and what a killed publisher
leaves behind is swept."""

import os
import time

import pytest
from kombu import Connection

from crawlproject import broker


@pytest.fixture
def channel(tmp_path):
    broker.install()
    folders = {k: str(tmp_path) for k in ("data_folder_in", "data_folder_out", "control_folder")}
    with Connection("filesystem://localhost/", transport_options=folders) as connection:
        channel = connection.default_channel
        assert isinstance(channel, broker.FilesystemChannel)
        yield channel


def test_a_message_being_written_is_not_taken(channel, tmp_path, monkeypatch):
    seen_while_writing = []
    rename = os.replace

    def replace_after_a_look(src, dst):
        # The file is written, not yet renamed: the consumer's view of the folder at that moment.
        try:
            seen_while_writing.append(channel._get("fetch"))
        except broker.Empty:
            seen_while_writing.append(None)
        rename(src, dst)

    monkeypatch.setattr(broker.os, "replace", replace_after_a_look)
    channel._put("fetch", {"body": "ids [1, 2, 3]"})
    assert seen_while_writing == [None]
    assert channel._get("fetch") == {"body": "ids [1, 2, 3]"}
    with pytest.raises(broker.Empty):
        channel._get("fetch")


def test_a_killed_publishers_part_file_is_swept_after_a_minute(channel, tmp_path, monkeypatch):
    old, fresh = tmp_path / "1_a.fetch.msg.part", tmp_path / "2_b.fetch.msg.part"
    for part in (old, fresh):
        part.write_bytes(b'{"half')
    os.utime(old, (time.time() - 120, time.time() - 120))
    monkeypatch.setattr(broker.FilesystemChannel, "_swept_at", 0.0)
    with pytest.raises(broker.Empty):
        channel._get("fetch")  # the half-written files are not messages
    assert not old.exists() and fresh.exists()


def test_11_an_idle_consumer_looks_at_its_folder_rarely_and_a_busy_one_often(tmp_path, monkeypatch):
    """Issue 48, 11: an idle `make serve` worker spent ~3% of a core listing the broker's folder
    a hundred times a second."""
    broker.install()
    looks = []
    get = broker.FilesystemChannel._get
    monkeypatch.setattr(broker.FilesystemChannel, "_get", lambda self, queue: looks.append(queue) or get(self, queue))
    folders = {k: str(tmp_path) for k in ("data_folder_in", "data_folder_out", "control_folder")}
    options = folders | {"polling_interval": 0.01}
    with Connection("filesystem://localhost/", transport_options=options) as connection:
        queue = connection.SimpleQueue("fetch")
        with pytest.raises(queue.Empty):
            queue.get(timeout=3)
        assert len(looks) < 30, f"an idle consumer looked {len(looks)} times in 3 s"
        queue.put({"ids": [1]})
        assert queue.get(timeout=3).payload == {"ids": [1]}
        transport = connection.transport
        assert transport.poll_interval(time.monotonic()) == 0.01, "a consumer that just got a message looks again soon"
        assert transport.poll_interval(time.monotonic() + 60) == broker.IDLE_POLLING_INTERVAL
        queue.close()


def test_a_stopping_workers_wait_for_messages_ends_after_one_look(tmp_path, monkeypatch):
    """The worker's loop sees a warm shutdown only between two waits: with the flag up, an empty
    wait ends after one look instead of at its timeout, so a stop takes no wait."""
    broker.install()
    looks = []
    get = broker.FilesystemChannel._get
    monkeypatch.setattr(broker.FilesystemChannel, "_get", lambda self, queue: looks.append(queue) or get(self, queue))
    folders = {k: str(tmp_path) for k in ("data_folder_in", "data_folder_out", "control_folder")}
    with Connection("filesystem://localhost/", transport_options=folders) as connection:
        connection.default_channel.basic_consume("fetch", no_ack=True, callback=lambda message: None, consumer_tag="t")
        monkeypatch.setattr(broker.worker_state, "should_stop", 0)  # what celery's SIGTERM handler sets
        with pytest.raises(TimeoutError):
            connection.drain_events(timeout=5)  # without the flag: looks for 5 s
    assert looks == ["fetch"]
