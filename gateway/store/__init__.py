"""The Redis adapter: keys, the thread store, events, streams, the psychologist's storage."""
