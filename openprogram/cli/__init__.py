"""The ``openprogram`` command line. Each command lives in its own module and imports what it
needs only when it runs, so ``openprogram recordings ...`` starts without any vendor SDK."""
