"""The data plane: the executor, Spark, the task runners, Kafka reading, converters and transforms."""
