"""A real S3 API server on loopback (moto's ThreadedMotoServer) and the STORAGES that point at it."""

import uuid

import boto3
import pytest
from botocore.config import Config
from django.conf import settings
from moto.server import ThreadedMotoServer

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing-secret"}


def s3_storages(endpoint: str, bucket: str) -> dict:
    """STORAGES as crawlproject/settings.py builds them for CRAWLHUB_STORAGE=s3."""
    options = {
        "bucket_name": bucket,
        "endpoint_url": endpoint,
        "access_key": CREDENTIALS["aws_access_key_id"],
        "secret_key": CREDENTIALS["aws_secret_access_key"],
        "region_name": "us-east-1",
        "file_overwrite": False,
        "querystring_auth": True,
        "querystring_expire": 3600,
        "client_config": Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 2, "mode": "standard"},
        ),
    }
    return {
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
        "staticfiles": settings.STORAGES["staticfiles"],
    }


@pytest.fixture(scope="session")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint):
    name = f"crawlhub-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=name)
    return client, name
