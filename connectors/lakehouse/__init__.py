"""Lakehouse table sinks: Apache Iceberg (``iceberg``) and Delta Lake (``delta``) tables written by Spark.

Both share one task shell (``table_sink``) and its pure parts: where a record goes (``routing``), when to
commit and which Kafka offsets a table already holds (``commits``), and how a table's schema follows the
records' (``evolution``). Only the table format's write and offset bookkeeping differ.
"""
