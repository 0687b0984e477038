"""Opening an input as a stream of bytes: files, stdin and file objects, gzip and zstd recognised by
their magic bytes (not by the file name), so ``zcat``-less pipes work too.

- gzip: ``1f 8b`` (Python's :mod:`gzip`);
- zstd: ``28 b5 2f fd`` (the ``zstandard`` package, in the ``cli`` extra; a clear error says so
  when it is missing).

:func:`open_bytes` returns a :class:`Opened`: a binary stream with ``read(n)``, a ``close``
function that closes only what it opened (never stdin or a caller's file object), the name for
messages, the path when the input is a file, and the compression found.

>>> import gzip, io
>>> opened = open_bytes(io.BytesIO(gzip.compress(b"x\\n1\\n")))
>>> opened.compression, opened.stream.read()
('gzip', b'x\\n1\\n')
>>> open_bytes(io.BytesIO(b"x\\n1\\n")).stream.read()
b'x\\n1\\n'
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Callable
from typing import IO, Any, NamedTuple

from ..errors import InputError

__all__ = ["GZIP_MAGIC", "DamagedInput", "Opened", "ZSTD_MAGIC", "compression_of", "open_bytes"]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class Opened(NamedTuple):
    """An input opened for reading: see :func:`open_bytes`."""

    stream: IO[bytes]
    close: Callable[[], None]
    name: str
    path: str | None
    compression: str | None


def compression_of(head: bytes) -> str | None:
    """``"gzip"``, ``"zstd"`` or None from the first bytes of a stream.

    >>> compression_of(b"\\x1f\\x8b\\x08"), compression_of(b"\\x28\\xb5\\x2f\\xfd")
    ('gzip', 'zstd')
    >>> compression_of(b"a,b") is None
    True
    """
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


class _Prefixed(io.RawIOBase):
    """The bytes ``head`` (already read) followed by the rest of ``raw``."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head = head
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._raw.read(len(view))
        if not data:
            return 0
        view[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0:
                out, self._head = self._head + self._raw.read(), b""
                return out
            if size <= len(self._head):
                out, self._head = self._head[:size], self._head[size:]
                return out
            out, self._head = self._head, b""
            return out + (self._raw.read(size - len(out)) or b"")
        return self._raw.read(size) or b""


def _head(raw: IO[bytes]) -> tuple[bytes, IO[bytes]]:
    """The first four bytes of ``raw`` and a stream that still yields them."""
    if hasattr(raw, "peek"):
        try:
            head = raw.peek(4)[:4]  # type: ignore[attr-defined]
            return head, raw
        except (OSError, ValueError):
            pass
    if raw.seekable() if hasattr(raw, "seekable") else False:
        pos = raw.tell()
        head = raw.read(4)
        raw.seek(pos)
        return head, raw
    head = raw.read(4) or b""
    return head, _Prefixed(head, raw)  # type: ignore[return-value]


class DamagedInput(InputError):
    """A compressed input ends early (a file cut while it was copied or rotated) or its
    compressed bytes are damaged: the bytes before the damage were read."""


class _Checked(io.RawIOBase):
    """A decompressing stream whose decompression errors (the input truncated or damaged)
    become :class:`DamagedInput` naming the input, whichever library raised them."""

    def __init__(self, stream: Any, name: str, kind: str, errors: tuple[type, ...]) -> None:
        self._stream, self._name, self._kind, self._errors = stream, name, kind, errors

    def readable(self) -> bool:
        return True

    def _damaged(self, exc: BaseException) -> DamagedInput:
        return DamagedInput(
            f"{self._name}: the {self._kind} data ends early or is damaged ({exc}): the input "
            "was cut or corrupted (a file still being written or copied?)"
        )

    def readinto(self, b: Any) -> int:
        # One read of the decompressor at a time (read1): an error loses no byte before it.
        view = memoryview(b).cast("B")
        try:
            piece = self._stream.read1(len(view)) if hasattr(self._stream, "read1") else None
            if piece is None:
                return self._stream.readinto(view) or 0
        except self._errors as exc:
            raise self._damaged(exc) from None
        view[: len(piece)] = piece
        return len(piece)

    def read(self, size: int | None = -1) -> bytes:
        if size is not None and size >= 0:
            buf = bytearray(size)
            return bytes(buf[: self.readinto(buf)])
        try:
            return self._stream.read() or b""
        except self._errors as exc:
            raise self._damaged(exc) from None

    def close(self) -> None:
        self._stream.close()
        super().close()


def _decompressed(raw: IO[bytes], kind: str | None, name: str) -> IO[bytes]:
    if kind == "gzip":
        import zlib

        stream = gzip.GzipFile(fileobj=raw, mode="rb")
        return _Checked(stream, name, kind, (EOFError, zlib.error, gzip.BadGzipFile))  # type: ignore[return-value]
    if kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise InputError(
                f"{name} is zstd-compressed: install the zstandard package "
                "(pip install 'sketchsyn[cli]') or decompress it first (zstd -dc)"
            ) from None
        stream = _ZstdFrames(raw, zstandard.ZstdDecompressor())
        return _Checked(stream, name, kind, (EOFError, zstandard.ZstdError))  # type: ignore[return-value]
    return raw


class _ZstdFrames(io.RawIOBase):
    """zstd frames one after another, decompressed; a last frame cut before its end raises
    EOFError (the ``zstandard`` package's stream reader returns the bytes so far and stops)."""

    _PIECE = 1 << 20

    def __init__(self, raw: IO[bytes], dctx: Any) -> None:
        self._raw, self._dctx = raw, dctx
        self._obj = dctx.decompressobj()
        self._out = b""
        self._fed = False  # the current frame has been given bytes

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        while not self._out:
            piece = self._raw.read(self._PIECE)
            if not piece:
                if self._fed and not self._obj.eof:
                    raise EOFError("the last zstd frame ends before its end")
                return 0
            while piece:
                self._fed = True
                self._out += self._obj.decompress(piece)
                piece = b""
                if self._obj.eof:  # the frame ended: the rest starts the next one
                    piece = self._obj.unused_data
                    self._obj = self._dctx.decompressobj()
                    self._fed = False
        n = min(len(view), len(self._out))
        view[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while True:
                buf = bytearray(self._PIECE)
                n = self.readinto(buf)
                if not n:
                    return b"".join(chunks)
                chunks.append(bytes(buf[:n]))
        buf = bytearray(size)
        n = self.readinto(buf)
        return bytes(buf[:n])


def open_bytes(source: Any) -> Opened:
    """Open a path, ``"-"`` (stdin) or a binary file object, decompressing gzip and zstd.

    Compression is recognised by the first bytes of the stream, whatever the name.

    Raises
    ------
    InputError
        The file cannot be opened, or it is zstd without the ``zstandard`` package.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == "-":
            raw: IO[bytes] = sys.stdin.buffer
            name, close, file_path = "<stdin>", (lambda: None), None
        else:
            try:
                raw = open(path, "rb")  # noqa: SIM115 (closed by the returned close)
            except OSError as exc:
                raise InputError(f"cannot open {path!r}: {exc.strerror or exc}") from None
            name, close, file_path = path, raw.close, path
    else:
        raw, name = source, str(getattr(source, "name", "<stream>"))
        close, file_path = (lambda: None), None
    head, raw = _head(raw)
    kind = compression_of(head)
    stream = _decompressed(raw, kind, name)
    if kind is not None and file_path is not None:
        inner, outer = stream, close

        def close() -> None:
            inner.close()
            outer()

    return Opened(stream, close, name, file_path, kind)
