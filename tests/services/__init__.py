"""Services the environment tests start and stop: a Spark standalone cluster, HDFS, an S3-compatible
server, and the Maven resolver that fetches their test-only jars into a cache outside the repo."""
