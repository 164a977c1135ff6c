"""Codecs below storage, the data plane and the plugins: pure byte and text formats with no I/O.

Why a package of its own: Java's JSON spelling (:mod:`.java_json`) is written by the internal topics'
records (``runtime/storage``), by the JSON converters and sink batches (``runtime/dataplane``) and by
ConfigDef's messages (``runtime/plugins``). Kept in storage, it made the data plane and the plugins reach
into the storage layer for a number format; here every one of them imports it from below, and this
package imports nothing else from kconnect.
"""
