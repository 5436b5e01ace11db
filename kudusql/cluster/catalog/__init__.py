"""The master's durable catalog: its records, their encoding and the store they go to."""
