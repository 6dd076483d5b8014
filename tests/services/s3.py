"""An S3-compatible server for the tests (moto's, in a child process) and Spark's ``s3a://`` client.

``start_s3(tmp_dir)`` returns an :class:`S3` with ``.endpoint`` (``http://127.0.0.1:<port>``),
``.create_bucket(name)`` and ``.stop()``; the session fixture ``s3`` (tests/conftest.py) starts
one for the test session. :func:`s3a_jars` resolves ``hadoop-aws`` of pyspark's Hadoop version
and the AWS SDK v2 modules it needs (not the SDK's 600 MB ``bundle``) through
tests/services/maven.py, and :func:`spark_conf` gives the settings that point ``s3a://`` at the
server. The jars must be on the driver's class path when its JVM starts, so the ``spark``
fixture adds them only when a test marked ``s3`` is collected.

Run as ``python -m tests.services.s3``, this module is the server: moto's S3 on 127.0.0.1 and a
free port, printing ``S3 http://127.0.0.1:<port>`` when it serves and exiting when its standard
input ends. Moto checks ``If-None-Match: *`` and then stores the object in two steps that
concurrent requests can interleave; S3 makes a conditional write atomic, so the server runs the
conditional writes (requests with ``If-None-Match`` or ``If-Match``) one at a time.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from tests.services.maven import Artifact, hadoop_version, resolve, unbundled
from tests.services.process import ServiceProcess

# The AWS SDK v2 version hadoop-aws is built with (aws-java-sdk-v2.version of hadoop-project)
SDK_VERSIONS = {"3.5.0": "2.35.4"}
ACCESS_KEY = SECRET_KEY = "accelerator-tests"
REGION = "us-east-1"


class S3:
    """A running S3-compatible server: ``endpoint`` is its URL, ``stop()`` ends it."""

    def __init__(self, service: ServiceProcess):
        self._service = service
        self.endpoint = service.address
        self.log = service.log

    def create_bucket(self, name: str) -> str:
        """Creates the bucket ``name`` (no error when it exists); returns ``s3a://<name>``."""
        client = self.client()
        if name not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
            client.create_bucket(Bucket=name)
        return f"s3a://{name}"

    def client(self) -> Any:
        """A boto3 S3 client of the server (boto3 comes with moto)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def stop(self) -> None:
        """Stops the server (its objects are gone)."""
        self._service.stop()


def start_s3(tmp_dir: str | os.PathLike) -> S3:
    """Starts the server (its log is ``tmp_dir/s3.log``); raises ServiceError with the log's tail
    when it cannot start."""
    command = [sys.executable, "-m", "tests.services.s3"]
    root = Path(__file__).resolve().parents[2]
    return S3(ServiceProcess("S3 server (moto)", command, Path(tmp_dir) / "s3.log", "S3 ",
                             timeout_s=60, cwd=root))


def s3a_jars() -> list[Path]:
    """``hadoop-aws`` and the AWS SDK modules S3A uses, minus the jars pyspark already has."""
    version = hadoop_version()
    if version not in SDK_VERSIONS:
        raise RuntimeError(f"no AWS SDK version known for Hadoop {version}: add the "
                           f"aws-java-sdk-v2.version of hadoop-project {version} to SDK_VERSIONS")
    sdk = SDK_VERSIONS[version]
    return unbundled(resolve("s3a", [
        Artifact(f"org.apache.hadoop:hadoop-aws:{version}", ("software.amazon.awssdk:bundle",)),
        *(Artifact(f"software.amazon.awssdk:{module}:{sdk}")
          for module in ("s3", "s3-transfer-manager", "sts"))]))


def spark_conf(endpoint: str) -> dict[str, str]:
    """Spark settings for ``s3a://`` on the server at ``endpoint``."""
    s3a = {
        "endpoint": endpoint,
        "endpoint.region": REGION,
        "path.style.access": "true",
        "connection.ssl.enabled": "false",
        "access.key": ACCESS_KEY,
        "secret.key": SECRET_KEY,
        "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "attempts.maximum": "3",
        "retry.limit": "3",
    }
    return {f"spark.hadoop.fs.s3a.{key}": value for key, value in s3a.items()}


def _serve() -> None:
    """The server: moto's S3 app with conditional writes serialized, on a free port."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    moto_app = DomainDispatcherApplication(create_backend_app)
    conditional = threading.Lock()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ:
            with conditional:
                return list(moto_app(environ, start_response))
        return moto_app(environ, start_response)

    server = make_server("127.0.0.1", 0, app, threaded=True)
    os.environ["MOTO_PORT"] = str(server.server_port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"S3 http://127.0.0.1:{server.server_port}", flush=True)
    sys.stdin.read()      # until the test process closes it or dies
    server.shutdown()


if __name__ == "__main__":
    _serve()
