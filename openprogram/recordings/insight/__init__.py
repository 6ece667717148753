"""What recorded calls say about a run: what they used and cost (``usage``), the limits a test
keeps to (``budget``), how much of each request a vendor's prompt cache could reuse
(``cache_prefix``), and which differences between two recordings of one run are only volatile
values (``doctor``). docs/tutorial.md, "What an agent suite spends and breaks"."""
