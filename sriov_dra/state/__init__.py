"""Node-local durable state: the prepared-claims checkpoint and the CDI spec files."""
