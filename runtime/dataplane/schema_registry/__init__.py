"""Confluent's Schema Registry converters: Avro, Protobuf and JSON Schema in Confluent's wire format.

``wire`` frames and unframes the bytes (magic byte 0, 4-byte schema id, Protobuf's message indexes),
``avro_data`` maps Connect schemas and values to Avro and back as Confluent's AvroData does,
``logical_ints`` writes Connect's Date, Time and Timestamp as their integers (Avro defaults, JSON Schema),
``registry`` talks to the registry through confluent-kafka's client with the converters' settings,
``columns`` decodes a Spark frame's column, and one module per converter puts them together.
"""
