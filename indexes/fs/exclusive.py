"""Creating a file only if it does not exist yet, atomically, where the store offers it itself:
a local file (a hard link into place) and an S3 object (a conditional PUT through S3A)."""
from __future__ import annotations

import os
import uuid
from typing import Any


CONDITIONAL_OVERWRITE = "fs.option.create.conditional.overwrite"
S3A_CONDITIONAL_CREATE = "fs.s3a.create.conditional.enabled"


def create_local(path: str, data: bytes) -> bool:
    """Creates the local file ``path`` holding ``data`` only if it does not exist yet; returns
    whether this call created it (see :meth:`~indexes.fs.HadoopFs.create_exclusive`)."""
    if os.path.lexists(path):
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{uuid.uuid4()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def _s3_status(exc: BaseException) -> int | None:
    """The HTTP status of the S3 error behind a py4j error, if one is in its Java causes."""
    cause = getattr(exc, "java_exception", None)
    while cause is not None:
        if str(cause.getClass().getName()).endswith(".S3Exception"):
            return int(cause.statusCode())
        cause = cause.getCause()
    return None


def put_if_absent(fs: Any, target: Any, data: bytearray, attempts: int = 5) -> bool:
    """One S3 conditional PUT of ``data`` to ``target`` (a Hadoop ``Path`` of the S3A file
    system ``fs``; S3A sends it on ``close``); returns whether this call created it."""
    if not fs.getConf().getBoolean(S3A_CONDITIONAL_CREATE, True):
        raise OSError(f"{S3A_CONDITIONAL_CREATE}=false: cannot create {target} exclusively")
    conflicts = 0
    while True:
        stream = (fs.createFile(target).overwrite(True)
                  .must(CONDITIONAL_OVERWRITE, True).build())
        try:
            try:
                stream.write(data)
            finally:
                stream.close()
            return True
        except Exception as exc:   # py4j wraps RemoteFileChangedException(S3Exception)
            status = _s3_status(exc)
            if status == 412:
                return False
            conflicts += 1
            if status != 409 or conflicts >= attempts:
                raise
