"""FileStream source and sink connectors: lines of a file (or stdin/stdout) to and from a topic.

They re-implement Apache Kafka Connect's ``org.apache.kafka.connect.file`` connectors, answer to the
same class names and config keys, and store the same source offsets (partition
``{"filename": path}``, offset ``{"position": n}``), so a config written for Java runs here and
offsets survive a move between the two. Unlike Java, which counts decoded characters but skips bytes
when resuming, ``position`` here is always a byte offset, so non-ASCII files resume at the right line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import IO, Any, ClassVar

from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TopicPartition,
    frozen_record,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValidationError,
    Importance,
    NonEmptyString,
    Type,
)

log = logging.getLogger(__name__)

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TASK_BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_TASK_BATCH_SIZE = 2000

FILENAME_FIELD = "filename"
POSITION_FIELD = "position"

SOURCE_CONFIG_DEF = (
    ConfigDef()
    .define(
        FILE_CONFIG,
        Type.STRING,
        None,
        None,
        Importance.HIGH,
        "File to read lines from; when unset, standard input is read.",
    )
    .define(
        TOPIC_CONFIG,
        Type.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "Topic the lines are written to.",
    )
    .define(
        TASK_BATCH_SIZE_CONFIG,
        Type.INT,
        DEFAULT_TASK_BATCH_SIZE,
        None,
        Importance.LOW,
        "Largest number of lines the task returns from one poll of the file.",
    )
)

SINK_CONFIG_DEF = ConfigDef().define(
    FILE_CONFIG,
    Type.STRING,
    None,
    None,
    Importance.HIGH,
    "File the record values are appended to, one per line; when unset, standard output is used.",
)


def _filename(props: Mapping[str, str]) -> str | None:
    """The configured file, or None for stdin/stdout: Java treats an empty value as unset too."""
    return props.get(FILE_CONFIG) or None


class FileStreamSourceConnector(UniformTasks, SourceConnector):
    """Reads one file (or stdin) into one topic; one stream, so always exactly one task."""

    class_aliases = ("org.apache.kafka.connect.file.FileStreamSourceConnector",)
    CONFIG = SOURCE_CONFIG_DEF
    max_tasks_cap = 1

    def check(self, props: Mapping[str, str]) -> None:
        """The ConfigDef's checks plus one Java lacks: ``topic`` must be a single topic, since every line is
        written once."""
        topic = SOURCE_CONFIG_DEF.parse(props)[TOPIC_CONFIG]
        if "," in topic:
            # A comma can never be part of a Kafka topic name: this is a list, which a source that
            # writes each line once cannot honour. Java 3.9 only finds out when producing.
            raise ConfigValidationError(TOPIC_CONFIG, topic, "must name a single topic, not a list")

    def start(self, props: dict[str, str]) -> None:
        """Check and keep the config as :class:`UniformTasks` does, and log which stream is read, as Java's
        connector does at start."""
        super().start(props)
        log.info("Starting file source connector reading from %s", _filename(props) or "standard input")

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """SUPPORTED for a real file, which can be re-read from a committed byte position, and UNSUPPORTED for
        stdin, which cannot; Java's connector answers the same."""
        # A real file that is only appended to can be re-read from a committed position; stdin cannot.
        return ExactlyOnceSupport.SUPPORTED if _filename(props) else ExactlyOnceSupport.UNSUPPORTED

    def alter_offsets(
        self, props: Mapping[str, str], offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
    ) -> bool:
        """Accept offsets only in the shape the task reads back (partition ``{"filename"}``, offset
        ``{"position": non-negative long}`` or null) and never for stdin, with Java's messages, so a bad PATCH
        fails at the REST call rather than when the task resumes."""
        if not _filename(props):
            raise ConnectorError(
                "Offsets cannot be modified if the 'file' configuration is unspecified. This is because "
                "stdin is used for input and offsets are not tracked."
            )
        for partition, offset in offsets:
            if offset is not None:
                if POSITION_FIELD not in offset:
                    raise ConnectorError("Offset objects should either be null or contain the key 'position'")
                position = offset[POSITION_FIELD]
                if not isinstance(position, int) or isinstance(position, bool):
                    raise ConnectorError(
                        "The value for the 'position' key in the offset is expected to be a Long value"
                    )
                if position < 0:
                    raise ConnectorError(
                        "The value for the 'position' key in the offset should be a non-negative value"
                    )
            if partition is None:
                raise ConnectorError("Partition objects cannot be null")
            if FILENAME_FIELD not in partition:
                raise ConnectorError("Partition objects should contain the key 'filename'")
        return True


class FileStreamSinkConnector(UniformTasks, SinkConnector):
    """Appends the values of consumed records to a file (or stdout), one line each."""

    class_aliases = ("org.apache.kafka.connect.file.FileStreamSinkConnector",)
    CONFIG = SINK_CONFIG_DEF

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Any offsets are accepted: the file keeps no position of its own, so the consumer group's offsets
        are the whole state."""
        # The file holds no position of its own: consumer offsets are all there is, so any are fine.
        return True


class FileStreamSourceTask(SourceTask):
    """Turns each line of the file into a record; resumes from the committed byte position."""

    #: How long ``poll`` waits when there is nothing to read, so an idle task does not spin (Java's
    #: FileStreamSourceTask waits a second). ``stop`` cuts the wait short.
    idle_wait_s: ClassVar[float] = 1.0
    #: The first wait after lines were read: a file being written is looked at again sooner, the wait
    #: doubling up to ``idle_wait_s`` while nothing comes. A line written to a busy file waits about
    #: this long instead of up to a second; an idle file is still looked at once a second.
    busy_wait_s: ClassVar[float] = 0.5
    read_size: ClassVar[int] = 64 * 1024

    def __init__(self) -> None:
        self.filename: str | None = None
        self.topic = ""
        self.batch_size = DEFAULT_TASK_BATCH_SIZE
        self._stream: IO[bytes] | None = None
        self._buffer = bytearray()
        #: Byte position just after the last line returned; None for stdin, where it means nothing.
        self._position: int | None = None
        self._partition: dict[str, str | None] = {FILENAME_FIELD: None}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        #: The next idle wait (see ``busy_wait_s``).
        self._wait_s: float | None = None

    def version(self) -> str:
        """kconnect's version: the task ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Read the config and choose the stream; a file is only opened at the first poll, after the committed
        position is read, so a file that does not exist yet is waited for instead of failing the task."""
        self.filename = _filename(props)
        #: One source partition map for all records: the runtime only reads it.
        self._partition = {FILENAME_FIELD: self.filename}
        topic = props.get(TOPIC_CONFIG)
        if topic is None:
            raise ConnectorError("FileStreamSourceTask config missing topic setting")
        self.topic = topic
        self.batch_size = max(1, int(props.get(TASK_BATCH_SIZE_CONFIG, DEFAULT_TASK_BATCH_SIZE)))
        self._stopping.clear()
        if self.filename is None:
            self._stream = sys.stdin.buffer
            self._position = None

    def poll(self) -> list[SourceRecord] | None:
        """Up to ``batch.size`` complete lines as records, each carrying the byte position after it as its
        offset; None after an idle wait when there is nothing new, so the runner does not spin. A partial last
        line waits for its end."""
        if self._stream is None and not self._open():
            self._idle()
            return None
        records: list[SourceRecord] = []
        # One timestamp per poll: the lines of one poll are read within milliseconds of each other.
        timestamp = int(time.time() * 1000)
        try:
            while len(records) < self.batch_size:
                lines = self._extract_lines(self.batch_size - len(records))
                if lines:
                    records.extend(self._records(lines, timestamp))
                    continue
                chunk = self._read_available()
                if not chunk:
                    break
                self._buffer += chunk
        except (OSError, ValueError):
            # The stream was closed under us by stop(); the runtime is shutting this task down.
            return None
        if not records:
            self._idle()
            return None
        self._wait_s = min(self.busy_wait_s, self.idle_wait_s)
        return records

    def stop(self) -> None:
        """Close the file under a lock so that a poll in progress ends (its read fails and it returns None);
        stdin is left open, since the process owns it."""
        self._stopping.set()
        with self._lock:
            stream, self._stream = self._stream, None
            if stream is not None and stream is not sys.stdin.buffer:
                stream.close()

    def _open(self) -> bool:
        assert self.filename is not None
        position = self._stored_position()
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - held open across polls, closed by stop()
        except FileNotFoundError:
            log.warning(
                "Couldn't find file %s for FileStreamSourceTask, waiting for it to be created", self.filename
            )
            return False
        if position:
            log.debug("Found previous offset, seeking to byte %d of %s", position, self.filename)
            stream.seek(position)
        with self._lock:
            self._stream = stream
        self._position = position or 0
        self._buffer.clear()
        return True

    def _stored_position(self) -> int | None:
        if self.context is None:
            return None
        offset = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
        if offset is None:
            return None
        position = offset.get(POSITION_FIELD)
        if position is not None and (not isinstance(position, int) or isinstance(position, bool)):
            raise ConnectorError("Offset position is the incorrect type")
        return position

    def _read_available(self) -> bytes:
        stream = self._stream
        if stream is None:
            return b""
        if stream is sys.stdin.buffer:
            # Read only what is there: a blocking read would keep stop() from ending the task.
            fd = stream.fileno()
            ready, _, _ = select.select([fd], [], [], 0)
            return os.read(fd, self.read_size) if ready else b""
        return stream.read(self.read_size)

    def _extract_lines(self, limit: int) -> list[tuple[str, int | None]]:
        """Take up to ``limit`` complete lines off the buffer, each with the byte position just after it
        (None for stdin); ``\\n``, ``\\r\\n`` and ``\\r`` all end one.

        Why many at once: the buffer is scanned with a moving index and trimmed once at the end; trimming
        it per line would move the rest of the buffer (up to ``read_size`` bytes) for every line.
        """
        if b"\r" not in self._buffer:
            return self._split_lines(limit)
        return self._scan_lines(limit)

    def _scan_lines(self, limit: int) -> list[tuple[str, int | None]]:
        """``_extract_lines`` line by line, for buffers where ``\\r`` may end a line."""
        buffer = self._buffer
        size = len(buffer)
        start = 0
        out: list[tuple[str, int | None]] = []
        position = self._position
        while len(out) < limit:
            newline = buffer.find(b"\n", start)
            carriage = buffer.find(b"\r", start, newline if newline >= 0 else size)
            if carriage >= 0:
                if carriage + 1 >= size:
                    break  # a \r\n may be split across reads: wait for the next byte
                until, next_start = carriage, carriage + (2 if buffer[carriage + 1] == 0x0A else 1)
            elif newline >= 0:
                until, next_start = newline, newline + 1
            else:
                break
            if position is not None:
                position += next_start - start
            out.append((buffer[start:until].decode("utf-8", errors="replace"), position))
            start = next_start
        if start:
            del buffer[:start]
            self._position = position
        return out

    def _split_lines(self, limit: int) -> list[tuple[str, int | None]]:
        """``_extract_lines`` of a buffer holding no ``\\r`` (files of ``\\n`` lines, the common case): its
        complete lines split off in one call instead of found one at a time, about a third of the cost
        per line."""
        buffer = self._buffer
        end = buffer.rfind(b"\n")
        if end < 0:
            return []
        lines = buffer[:end].split(b"\n")
        del lines[limit:]
        if not lines:
            return []
        lengths = [len(line) + 1 for line in lines]
        del buffer[: sum(lengths)]
        texts = [line.decode("utf-8", errors="replace") for line in lines]
        position = self._position
        if position is None:
            return [(text, None) for text in texts]
        ends = [position + length for length in accumulate(lengths)]
        self._position = ends[-1]
        return list(zip(texts, ends, strict=True))

    def _records(self, lines: list[tuple[str, int | None]], timestamp: int) -> list[SourceRecord]:
        """One record per line, in one comprehension (no call per line): the same records as
        ``SourceRecord(...)`` builds, made with ``frozen_record`` instead of the slow frozen ``__init__``."""
        partition, topic = self._partition, self.topic
        return [
            frozen_record(
                SourceRecord,
                {
                    "source_partition": partition,
                    "source_offset": {POSITION_FIELD: position},
                    "topic": topic,
                    "partition": None,
                    "key": None,
                    "value": line,
                    "headers": (),
                    "timestamp": timestamp,
                },
            )
            for line, position in lines
        ]

    def _idle(self) -> None:
        wait = self.idle_wait_s if self._wait_s is None else min(self._wait_s, self.idle_wait_s)
        self._wait_s = min(wait * 2, self.idle_wait_s)
        self._stopping.wait(wait)


def _java_string_of(value: Any) -> str:
    """What Java's ``println(Object)`` writes for a record value, so sink files match Java's."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_java_string_of(k)}={_java_string_of(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_java_string_of(v) for v in value) + "]"
    return str(value)


class FileStreamSinkTask(SinkTask):
    """Appends each record's value as a line; ``flush`` pushes the lines out to the file."""

    def __init__(self, output: IO[str] | None = None) -> None:
        #: An output stream given here (for tests or embedding) is used instead of the configured file.
        self._given_output = output
        self._output: IO[str] | None = output
        self.filename: str | None = None

    def version(self) -> str:
        """kconnect's version: the task ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Open the file for appending (or use stdout), failing the task at start when it cannot be created
        rather than at its first record."""
        parsed = SINK_CONFIG_DEF.parse(props)
        if self._given_output is not None:
            return
        self.filename = parsed[FILE_CONFIG] or None
        if self.filename is None:
            self._output = sys.stdout
            return
        try:
            self._output = open(self.filename, "a", encoding="utf-8")  # noqa: SIM115 - closed by stop()
        except OSError as exc:
            raise ConnectorError(
                f"Couldn't find or create file '{self.filename}' for FileStreamSinkTask"
            ) from exc

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Append each record's value as one line, written as Java's ``println`` would print it so that the
        files of both runtimes match; :meth:`flush` makes them durable."""
        output = self._require_output()
        # One write per batch: text values (the common case) are joined as they are.
        output.write(
            "".join(
                [
                    (value if isinstance(value := record.value, str) else _java_string_of(value)) + "\n"
                    for record in records
                ]
            )
        )

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Push the buffered lines to the file before the runner commits the offsets that cover them, so a
        committed record is in the file."""
        self._require_output().flush()

    def stop(self) -> None:
        """Close the file this task opened; stdout and a stream given to the constructor belong to someone
        else and stay open."""
        output, self._output = self._output, None
        if output is not None and output is not sys.stdout and output is not self._given_output:
            with contextlib.suppress(OSError):
                output.close()

    def _require_output(self) -> IO[str]:
        if self._output is None:
            raise ConnectorError("FileStreamSinkTask is not started")
        return self._output


# The connectors are defined before their tasks (the module reads top-down as Java's pair of files).
FileStreamSourceConnector.TASK = FileStreamSourceTask
FileStreamSinkConnector.TASK = FileStreamSinkTask
